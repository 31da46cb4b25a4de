// gMock matchers for absl::Status and absl::StatusOr<T>.
//
// Debian's Abseil (20220623) is built without ABSL_BUILD_TEST_HELPERS, so absl::status_matchers
// is missing; these are the two matchers our tests need, with the same spelling:
//
//   EXPECT_THAT(store.Open(spec), StatusIs(absl::StatusCode::kNotFound));
//   EXPECT_THAT(s, StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("empty file")));
//   ASSERT_THAT(source_or, IsOk());
//
// Both accept an absl::Status or any absl::StatusOr<T>. Inside namespace emb, spell gMock's own
// namespace `::testing`, since `testing` there names emb::testing.
#ifndef EMB_TESTS_TESTING_STATUS_MATCHERS_H_
#define EMB_TESTS_TESTING_STATUS_MATCHERS_H_

#include <ostream>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gmock/gmock.h"

namespace emb::testing {
namespace internal_status {

inline const absl::Status& GetStatus(const absl::Status& s) { return s; }
template <typename T>
const absl::Status& GetStatus(const absl::StatusOr<T>& s) {
  return s.status();
}

// Matches a status (or a StatusOr's status) whose code is `code_` and whose message matches
// `message_`.
class StatusIsMatcher {
 public:
  StatusIsMatcher(absl::StatusCode code, ::testing::Matcher<const std::string&> message)
      : code_(code), message_(std::move(message)) {}

  template <typename T>
  bool MatchAndExplain(const T& value, ::testing::MatchResultListener* listener) const {
    const absl::Status& s = GetStatus(value);
    *listener << "whose status is " << s;
    if (s.code() != code_) {
      return false;
    }
    ::testing::StringMatchResultListener inner;
    if (!message_.MatchAndExplain(std::string(s.message()), &inner)) {
      *listener << ", whose message " << (inner.str().empty() ? "doesn't match" : inner.str());
      return false;
    }
    return true;
  }

  void DescribeTo(std::ostream* os) const {
    *os << "has status code " << absl::StatusCodeToString(code_) << " and a message that ";
    message_.DescribeTo(os);
  }
  void DescribeNegationTo(std::ostream* os) const {
    *os << "doesn't have status code " << absl::StatusCodeToString(code_)
        << " or has a message that ";
    message_.DescribeNegationTo(os);
  }

 private:
  absl::StatusCode code_;
  ::testing::Matcher<const std::string&> message_;
};

// Matches an OK status (or a StatusOr holding a value).
class IsOkMatcher {
 public:
  template <typename T>
  bool MatchAndExplain(const T& value, ::testing::MatchResultListener* listener) const {
    const absl::Status& s = GetStatus(value);
    *listener << "whose status is " << s;
    return s.ok();
  }
  void DescribeTo(std::ostream* os) const { *os << "is OK"; }
  void DescribeNegationTo(std::ostream* os) const { *os << "is not OK"; }
};

}  // namespace internal_status

// StatusIs(code): the status has `code`, any message.
// StatusIs(code, m): the status has `code` and its message (as std::string) matches m, which may
// be a gMock string matcher such as HasSubstr("...") or a plain string for equality.
template <typename MessageMatcher>
::testing::PolymorphicMatcher<internal_status::StatusIsMatcher> StatusIs(absl::StatusCode code,
                                                                         MessageMatcher&& message) {
  return ::testing::MakePolymorphicMatcher(internal_status::StatusIsMatcher(
      code, ::testing::MatcherCast<const std::string&>(std::forward<MessageMatcher>(message))));
}
inline ::testing::PolymorphicMatcher<internal_status::StatusIsMatcher> StatusIs(
    absl::StatusCode code) {
  return StatusIs(code, ::testing::_);
}

// IsOk(): the status is OK, or the StatusOr holds a value.
inline ::testing::PolymorphicMatcher<internal_status::IsOkMatcher> IsOk() {
  return ::testing::MakePolymorphicMatcher(internal_status::IsOkMatcher());
}

}  // namespace emb::testing

#endif  // EMB_TESTS_TESTING_STATUS_MATCHERS_H_
