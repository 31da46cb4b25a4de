#include "service/tables/hot_ids.h"

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/table_files.h"

namespace emb::service::hot_ids_test {
namespace {

using ::emb::testing::IdsNpyFile;
using ::emb::testing::IsOk;
using ::emb::testing::NpyFile;
using ::emb::testing::StatusIs;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

TEST(ParseHotIds, ReadsInt64IdsInTheFilesOrderDuplicatesKept) {
  auto ids = ParseHotIds("hot.npy", IdsNpyFile({7, 0, 99, 7, 3}), 100);
  ASSERT_THAT(ids, IsOk());
  EXPECT_THAT(*ids, ElementsAre(7, 0, 99, 7, 3));
}

TEST(ParseHotIds, WidensInt32Ids) {
  auto ids =
      ParseHotIds("hot.npy", IdsNpyFile({5, 1, 2147483647}, /*int32=*/true), int64_t{1} << 32);
  ASSERT_THAT(ids, IsOk());
  EXPECT_THAT(*ids, ElementsAre(5, 1, 2147483647));
}

TEST(ParseHotIds, AnEmptyArrayIsNoIds) {
  auto ids = ParseHotIds("hot.npy", IdsNpyFile({}), 10);
  ASSERT_THAT(ids, IsOk());
  EXPECT_THAT(*ids, IsEmpty());
}

TEST(ParseHotIds, AnIdOutOfRangeIsNamedWithItsPosition) {
  EXPECT_THAT(ParseHotIds("hot.npy", IdsNpyFile({1, 2, 100, 3}), 100),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("hot.npy: id 100 (at position 2) is out of range for a table of "
                                 "100 rows")));
  EXPECT_THAT(ParseHotIds("hot.npy", IdsNpyFile({-1}), 100),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("id -1 (at position 0)")));
  EXPECT_THAT(ParseHotIds("hot.npy", IdsNpyFile({-5}, /*int32=*/true), 100),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("id -5 (at position 0)")));
}

TEST(ParseHotIds, RefusesOtherTypesAndShapes) {
  EXPECT_THAT(ParseHotIds("hot.npy", NpyFile("<f4", {2}, std::string(8, '\0')), 10),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("hot.npy: unsupported dtype '<f4'; hot ids must be little-endian "
                                 "int64 (<i8) or int32 (<i4)")));
  EXPECT_THAT(ParseHotIds("hot.npy", NpyFile(">i8", {1}, std::string(8, '\0')), 10),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("unsupported dtype '>i8'")));
  EXPECT_THAT(ParseHotIds("hot.npy", NpyFile("<i8", {2, 1}, std::string(16, '\0')), 10),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("shape (2, 1); hot ids must be a 1-D array of row ids")));
}

TEST(ParseHotIds, RefusesDataOfAnotherSizeThanTheShapeSays) {
  std::string cut = IdsNpyFile({1, 2, 3});
  cut.resize(cut.size() - 1);
  EXPECT_THAT(ParseHotIds("hot.npy", cut, 10),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("holds 23 bytes of data, not the 3 ids of 8 bytes")));
  EXPECT_THAT(ParseHotIds("hot.npy", IdsNpyFile({1, 2}) + "x", 10),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("holds 17 bytes of data")));
  // A shape so large that its bytes overflow.
  EXPECT_THAT(ParseHotIds("hot.npy", NpyFile("<i8", {int64_t{1} << 62}, ""), 10),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("holds 0 bytes of data")));
}

TEST(ParseHotIds, RefusesWhatIsNotANpyFile) {
  EXPECT_THAT(ParseHotIds("hot.npy", "not a numpy file", 10),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("hot.npy: bad magic")));
  EXPECT_THAT(ParseHotIds("hot.npy", "", 10),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("hot.npy: cut .npy header")));
}

class ReadHotIdsTest : public ::testing::Test {
 protected:
  testing::TempDir dir_;
};

TEST_F(ReadHotIdsTest, ReadsAFile) {
  const std::string path = dir_.File("hot.npy");
  ASSERT_THAT(testing::WriteFile(path, IdsNpyFile({4, 2})), IsOk());
  auto ids = ReadHotIds(path, 5);
  ASSERT_THAT(ids, IsOk());
  EXPECT_THAT(*ids, ElementsAre(4, 2));
  EXPECT_THAT(ReadHotIds(path, 4),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr(path), HasSubstr("id 4 (at position 0) is out of range"))));
}

TEST_F(ReadHotIdsTest, AMissingFileIsNotFound) {
  EXPECT_THAT(ReadHotIds(dir_.File("missing.npy"), 5),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("missing.npy: cannot open")));
}

TEST_F(ReadHotIdsTest, ADirectoryIsRefused) {
  EXPECT_THAT(ReadHotIds(dir_.path(), 5),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not a regular file")));
}

// A file larger than 8 bytes a row of the table, plus room for a header, is refused unread.
TEST_F(ReadHotIdsTest, AFileFarLargerThanTheTableIsRefused) {
  const std::string path = dir_.File("hot.npy");
  ASSERT_THAT(testing::WriteFile(path, IdsNpyFile(std::vector<int64_t>(140000, 1))), IsOk());
  EXPECT_THAT(ReadHotIds(path, 2),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr(absl::StrCat(path,
                                              ": 1120128 bytes, more than the ids of a table "
                                              "of 2 rows need (1048592: 8 bytes a row and 1 MiB "
                                              "for the header)"))));
  EXPECT_THAT(ReadHotIds(path, 140000), IsOk());
}

}  // namespace
}  // namespace emb::service::hot_ids_test
