#include "service/common/byte_size.h"

#include <cstddef>
#include <string>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace emb::service::byte_size_test {
namespace {

using ::emb::testing::StatusIs;
using ::testing::HasSubstr;

TEST(ParseByteSize, BytesAndBinaryUnits) {
  EXPECT_EQ(*ParseByteSize("0"), 0u);
  EXPECT_EQ(*ParseByteSize("12345"), 12345u);
  EXPECT_EQ(*ParseByteSize("1K"), 1024u);
  EXPECT_EQ(*ParseByteSize("1k"), 1024u);
  EXPECT_EQ(*ParseByteSize("512M"), size_t{512} << 20);
  EXPECT_EQ(*ParseByteSize("4G"), size_t{4} << 30);
  EXPECT_EQ(*ParseByteSize("80g"), size_t{80} << 30);
  EXPECT_EQ(*ParseByteSize("2T"), size_t{2} << 40);
  EXPECT_EQ(*ParseByteSize("007"), 7u);
}

TEST(ParseByteSize, TheLargestSizeIsTwoToTheSixtyThreeLessOne) {
  EXPECT_EQ(*ParseByteSize("9223372036854775807"), size_t{9223372036854775807u});
  EXPECT_EQ(*ParseByteSize("8388607T"), size_t{8388607} << 40);
  for (const char* text :
       {"9223372036854775808", "99999999999999999999999", "8388608T", "9007199254740992K"}) {
    EXPECT_THAT(ParseByteSize(text),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("over 2^63 - 1 bytes")))
        << text;
  }
}

TEST(ParseByteSize, RefusesAnythingElseNamingIt) {
  const std::pair<const char*, const char*> cases[] = {
      {"", "'' is not a size: it is empty"},
      {"G", "'G' is not a size: it does not start with a digit"},
      {"-1", "'-1' is not a size: it does not start with a digit"},
      {" 1", "it does not start with a digit"},
      {"1 ", "' ' is not a unit"},
      {"1.5G", "'.5G' is not a unit"},
      {"4GB", "'GB' is not a unit"},
      {"4GiB", "'GiB' is not a unit"},
      {"4P", "'P' is not a unit"},
      {"0x10", "'x10' is not a unit"},
  };
  for (const auto& [text, message] : cases) {
    EXPECT_THAT(ParseByteSize(text),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         ::testing::AllOf(HasSubstr(message), HasSubstr("e.g. 4G"))))
        << "'" << text << "'";
  }
}

}  // namespace
}  // namespace emb::service::byte_size_test
