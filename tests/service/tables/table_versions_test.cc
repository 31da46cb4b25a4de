#include "service/tables/table_versions.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/data_type.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/table_files.h"

namespace emb::service::table_versions_test {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using testing::IsOk;
using ::testing::MatchesRegex;
using testing::StatusIs;
using testing::TempDir;
using ::testing::UnorderedElementsAre;

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

void MakeDir(const std::string& path) { ASSERT_EQ(mkdir(path.c_str(), 0755), 0) << path; }

// The entries of `dir`, by name.
std::vector<std::string> Names(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    names.push_back(e.path().filename().string());
  }
  return names;
}

// WriteVersion of a 2 x 3 float32 table of zeros into `dir`; `during` runs while its rows are read.
absl::StatusOr<VersionFile> Write(
    const std::string& dir, const std::function<void()>& during = [] {}) {
  return WriteVersion(dir, "t", 2, 3, DataType::kFloat32, 7,
                      [&](size_t, absl::Span<std::byte> out) {
                        std::memset(out.data(), 0, out.size());
                        during();
                        return absl::OkStatus();
                      });
}

TEST(ParseVersion, TakesDecimalNumbersFromOneToInt64MaxWithoutLeadingZeros) {
  EXPECT_EQ(ParseVersion("1"), 1);
  EXPECT_EQ(ParseVersion("42"), 42);
  EXPECT_EQ(ParseVersion("9223372036854775807"), kMax);
  for (const char* name : {"", "0", "00", "0001", "01", "-1", "+1", " 1", "1 ", "1a", "0x10",
                           "9223372036854775808", "99999999999999999999", ".tmp-2-1", "1.tmp"}) {
    EXPECT_EQ(ParseVersion(name), std::nullopt) << "'" << name << "'";
  }
}

// 0001 is no version: neither listed (so never served) nor opened as version 1.
TEST(ListVersions, ListsDirectoriesNamedAsVersionsOnly) {
  TempDir dir;
  MakeDir(dir.File("1"));
  MakeDir(dir.File("3"));
  MakeDir(dir.File("0004"));
  MakeDir(dir.File(".tmp-5-1"));
  ASSERT_THAT(testing::WriteFile(dir.File("6"), "a stray file"), IsOk());
  ASSERT_EQ(symlink("nowhere", dir.File("7").c_str()), 0);
  auto versions = ListVersions(dir.path());
  ASSERT_THAT(versions, IsOk());
  EXPECT_THAT(*versions, ElementsAre(3, 1));
}

TEST(OpenVersion, DoesNotOpenAVersionUnderAnotherSpellingOfItsNumber) {
  TempDir dir;
  MakeDir(dir.File("0001"));
  ASSERT_THAT(testing::WriteFile(dir.File("0001/t.npy"),
                                 testing::NpyFile("<f4", {2, 2}, std::string(16, '\0'))),
              IsOk());
  EXPECT_THAT(OpenVersion(TableSpec{"t", dir.path(), "", std::nullopt}, 1),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("has no version 1")));
}

// Issue 41, item 3: a stray file or a dangling link named N+1 made every rename into place fail.
TEST(NextVersion, GoesPastEveryEntryNamedAsAVersionWhateverItIs) {
  TempDir dir;
  auto next = NextVersion(dir.path());
  ASSERT_THAT(next, IsOk());
  EXPECT_EQ(*next, 1);
  MakeDir(dir.File("1"));
  ASSERT_THAT(testing::WriteFile(dir.File("2"), "a stray file"), IsOk());
  ASSERT_EQ(symlink("nowhere", dir.File("3").c_str()), 0);
  MakeDir(dir.File("0009"));  // no version: not counted
  next = NextVersion(dir.path());
  ASSERT_THAT(next, IsOk());
  EXPECT_EQ(*next, 4);
  EXPECT_THAT(NextVersion(dir.File("missing")), StatusIs(absl::StatusCode::kNotFound));
}

// Issue 41, item 3: after a version named 2^63-1 a save wrote version -2^63, which no server
// loads.
TEST(NextVersion, RefusesToFollowInt64MaxNamingTheLimit) {
  TempDir dir;
  MakeDir(dir.File("1"));
  MakeDir(dir.File("9223372036854775807"));
  EXPECT_THAT(NextVersion(dir.path()),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("named 9223372036854775807, the largest version number there "
                                 "can be (2^63-1)")));
  EXPECT_THAT(Write(dir.path()), StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(Names(dir.path()), UnorderedElementsAre("1", "9223372036854775807"));
}

TEST(WriteVersion, WritesPastAStrayFileNamedAsTheNextVersion) {
  TempDir dir;
  MakeDir(dir.File("1"));
  ASSERT_THAT(testing::WriteFile(dir.File("2"), "a stray file"), IsOk());
  auto file = Write(dir.path());
  ASSERT_THAT(file, IsOk());
  EXPECT_EQ(file->version, 3);
  EXPECT_EQ(file->path, dir.File("3/t.safetensors"));
}

// Issue 41, item 3: the temporary name was .tmp-N-PID, so a server killed mid-save that came back
// as the same PID (PID 1 in a container) found its earlier run's directory and every save failed
// "mkdir: File exists". A temporary name now carries a random token too.
TEST(WriteVersion, IgnoresATemporaryOfTheOldNameForItsOwnPid) {
  TempDir dir;
  MakeDir(dir.File("1"));
  const std::string old_name = dir.File(absl::StrCat(".tmp-2-", getpid()));
  MakeDir(old_name);
  ASSERT_THAT(testing::WriteFile(old_name + "/t.safetensors", "half"), IsOk());
  auto file = Write(dir.path());
  ASSERT_THAT(file, IsOk());
  EXPECT_EQ(file->version, 2);
}

// The temporary directory is .tmp-N-PID-TOKEN, and RemoveStaleTemporaries leaves it alone while
// the save writes it (it is locked).
TEST(WriteVersion, ItsTemporaryDirectoryIsUniqueAndLockedWhileWritten) {
  TempDir dir;
  std::vector<std::string> seen;
  absl::StatusOr<StaleTemporaries> cleaned;
  auto file = Write(dir.path(), [&] {
    seen = Names(dir.path());
    cleaned = RemoveStaleTemporaries(dir.path());
  });
  ASSERT_THAT(file, IsOk());
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_THAT(seen[0], MatchesRegex(absl::StrCat("\\.tmp-1-", getpid(), "-[0-9a-f]{16}")));
  ASSERT_THAT(cleaned, IsOk());
  EXPECT_THAT(cleaned->removed, IsEmpty());
  EXPECT_THAT(cleaned->kept,
              ElementsAre(dir.File(seen[0]) + ": a save of a running server is writing it"));
  EXPECT_THAT(Names(dir.path()), ElementsAre("1"));
}

TEST(RemoveStaleTemporaries, RemovesWhatAStoppedSaveLeftAndNothingElse) {
  TempDir dir;
  MakeDir(dir.File("1"));
  ASSERT_THAT(testing::WriteFile(dir.File("1/t.npy"), "x"), IsOk());
  MakeDir(dir.File(".tmp-2-1"));  // the old name, from PID 1
  ASSERT_THAT(testing::WriteFile(dir.File(".tmp-2-1/t.safetensors"), "half"), IsOk());
  MakeDir(dir.File(".tmp-3-1-00000000deadbeef"));
  ASSERT_THAT(testing::WriteFile(dir.File(".tmp-4"), "a file"), IsOk());
  ASSERT_EQ(symlink("nowhere", dir.File(".tmp-5").c_str()), 0);
  MakeDir(dir.File(".incoming-6"));  // a publisher's: not ours
  auto cleaned = RemoveStaleTemporaries(dir.path());
  ASSERT_THAT(cleaned, IsOk());
  EXPECT_THAT(cleaned->removed,
              UnorderedElementsAre(dir.File(".tmp-2-1"), dir.File(".tmp-3-1-00000000deadbeef"),
                                   dir.File(".tmp-4"), dir.File(".tmp-5")));
  EXPECT_THAT(cleaned->kept, IsEmpty());
  EXPECT_THAT(Names(dir.path()), UnorderedElementsAre("1", ".incoming-6"));
  EXPECT_THAT(Names(dir.File("1")), ElementsAre("t.npy"));
}

TEST(RemoveStaleTemporaries, KeepsWhatItCannotRemoveSayingWhy) {
  TempDir dir;
  MakeDir(dir.File(".tmp-2-1"));
  MakeDir(dir.File(".tmp-2-1/inner"));  // not a save's: it never makes directories inside
  auto cleaned = RemoveStaleTemporaries(dir.path());
  ASSERT_THAT(cleaned, IsOk());
  EXPECT_THAT(cleaned->removed, IsEmpty());
  EXPECT_THAT(cleaned->kept, ElementsAre(HasSubstr(".tmp-2-1: cannot remove all of it")));
  EXPECT_THAT(RemoveStaleTemporaries(dir.File("missing")), StatusIs(absl::StatusCode::kNotFound));
}

}  // namespace
}  // namespace emb::service::table_versions_test
