#include "service/rpc/request_validation.h"

#include <cstdint>
#include <initializer_list>
#include <limits>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "embedding/v1/embedding_admin.pb.h"
#include "embedding/v1/embedding_service.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/data_type.h"
#include "service/common/update_sequence.h"
#include "tests/testing/status_matchers.h"

namespace emb::service::request_validation_test {
namespace {

using ::emb::testing::IsOk;
using ::emb::testing::StatusIs;
using ::embedding::v1::LookUpRequest;
using ::testing::HasSubstr;

constexpr int64_t kMaxIds = 100;
constexpr int64_t kMaxBytes = 1 << 20;
const RequestTable kTable{"t", RowRange::Whole(10), 4, DataType::kBFloat16};

LookUpRequest Request(std::initializer_list<int64_t> ids, std::initializer_list<int64_t> shape = {},
                      embedding::v1::DataType dtype = embedding::v1::DATA_TYPE_UNSPECIFIED) {
  LookUpRequest r;
  r.mutable_ids()->Add(ids.begin(), ids.end());
  r.mutable_shape()->Add(shape.begin(), shape.end());
  r.set_dtype(dtype);
  return r;
}

TEST(ValidateLookUpRequest, IdsInRangeGetTheTablesTypeWithoutADtype) {
  absl::string_view reason;
  auto type = ValidateLookUpRequest(Request({0, 9, 3}), kTable, kMaxIds, kMaxBytes, &reason);
  ASSERT_THAT(type, IsOk());
  EXPECT_EQ(*type, DataType::kBFloat16);
}

TEST(ValidateLookUpRequest, RequestedDtypeIsTheAnswersType) {
  absl::string_view reason;
  auto type = ValidateLookUpRequest(Request({1, 2}, {1, 2}, embedding::v1::DATA_TYPE_FLOAT32),
                                    kTable, kMaxIds, kMaxBytes, &reason);
  ASSERT_THAT(type, IsOk());
  EXPECT_EQ(*type, DataType::kFloat32);
}

TEST(ValidateLookUpRequest, NegativeIdIsInvalidArgument) {
  absl::string_view reason;
  EXPECT_THAT(ValidateLookUpRequest(Request({1, -3}), kTable, kMaxIds, kMaxBytes, &reason),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("ids[1] = -3 is negative")));
  EXPECT_EQ(reason, kRejectNegativeId);
}

TEST(ValidateLookUpRequest, IdPastTheLastRowIsOutOfRange) {
  absl::string_view reason;
  EXPECT_THAT(ValidateLookUpRequest(Request({10}), kTable, kMaxIds, kMaxBytes, &reason),
              StatusIs(absl::StatusCode::kOutOfRange,
                       HasSubstr("ids[0] = 10 is out of range for table 't' with 10 rows")));
  EXPECT_EQ(reason, kRejectOutOfRange);
}

TEST(ValidateLookUpRequest, ShapeThatDoesNotHoldTheIdsIsBadShape) {
  absl::string_view reason;
  EXPECT_THAT(
      ValidateLookUpRequest(Request({1, 2, 3}, {2, 2}), kTable, kMaxIds, kMaxBytes, &reason),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("holds 4 ids but ids has 3")));
  EXPECT_EQ(reason, kRejectBadShape);
}

TEST(ValidateLookUpRequest, ShapeWhoseProductOverflowsIsBadShape) {
  absl::string_view reason;
  EXPECT_THAT(ValidateLookUpRequest(Request({1}, {int64_t{1} << 62, 4}), kTable, kMaxIds, kMaxBytes,
                                    &reason),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("overflows int64")));
  EXPECT_EQ(reason, kRejectBadShape);
}

TEST(ValidateLookUpRequest, MoreIdsThanTheLimitAreTooMany) {
  absl::string_view reason;
  EXPECT_THAT(ValidateLookUpRequest(Request({1, 2, 3}), kTable, 2, kMaxBytes, &reason),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("exceed the limit of 2")));
  EXPECT_EQ(reason, kRejectTooManyIds);
}

TEST(ValidateLookUpRequest, UnknownDtypeIsBadDtype) {
  absl::string_view reason;
  EXPECT_THAT(ValidateLookUpRequest(Request({1}, {}, static_cast<embedding::v1::DataType>(7)),
                                    kTable, kMaxIds, kMaxBytes, &reason),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("dtype 7")));
  EXPECT_EQ(reason, kRejectBadDtype);
}

TEST(ValidateLookUpRequest, AnswerOverTheLimitIsTooLarge) {
  absl::string_view reason;
  // 3 ids x 4 x 4 bytes (float32) = 48 bytes, over a 40-byte limit.
  EXPECT_THAT(ValidateLookUpRequest(Request({1, 2, 3}, {}, embedding::v1::DATA_TYPE_FLOAT32),
                                    kTable, kMaxIds, 40, &reason),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("would be 48 bytes")));
  EXPECT_EQ(reason, kRejectAnswerTooLarge);
}

// Found by tests/fuzz/lookup_request_fuzzer (UBSan: signed overflow in ids x dim x 4).
TEST(ValidateLookUpRequest, AnswerWhoseSizeOverflowsInt64IsTooLarge) {
  const RequestTable wide{"wide", RowRange::Whole(1), int64_t{1} << 60, DataType::kFloat32};
  absl::string_view reason;
  EXPECT_THAT(ValidateLookUpRequest(Request({0, 0, 0, 0}), wide, kMaxIds, INT64_MAX, &reason),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("would be over 9223372036854775807 bytes")));
  EXPECT_EQ(reason, kRejectAnswerTooLarge);
}

// One bfloat16 row of kTable for row 3, with `sequence`.
embedding::v1::UpdateRowsRequest Update(int64_t sequence) {
  embedding::v1::UpdateRowsRequest r;
  r.add_ids(3);
  r.set_rows(std::string(4 * 2, '\0'));
  r.set_sequence(sequence);
  return r;
}

TEST(ValidateUpdateRowsRequest, TakesSequencesBelowTheLimit) {
  for (int64_t sequence : {int64_t{1}, int64_t{1700000000000000000}, kSequenceLimit - 1}) {
    auto type = ValidateUpdateRowsRequest(Update(sequence), kTable);
    ASSERT_THAT(type, IsOk()) << sequence;
    EXPECT_EQ(*type, DataType::kBFloat16);
  }
}

// Issue 41, item 3: a message of sequence 2^63-1 was applied, and then no later message could
// have a greater one: the table took no update until a version was loaded over it.
TEST(ValidateUpdateRowsRequest, RefusesASequenceFromTheLimitOnNamingIt) {
  EXPECT_EQ(kSequenceLimit, int64_t{4611686018427387904});
  for (int64_t sequence : {kSequenceLimit, std::numeric_limits<int64_t>::max()}) {
    EXPECT_THAT(ValidateUpdateRowsRequest(Update(sequence), kTable),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         HasSubstr(absl::StrCat("sequence ", sequence,
                                                " is not below 4611686018427387904 (2^62), the "
                                                "limit of an update's sequence"))));
  }
}

}  // namespace
}  // namespace emb::service::request_validation_test
