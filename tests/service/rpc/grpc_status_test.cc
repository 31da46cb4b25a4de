#include "service/rpc/grpc_status.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "grpcpp/support/status.h"
#include "gtest/gtest.h"

namespace emb::service::grpc_status_test {
namespace {

// Every google.rpc.Code, spelled in both libraries.
const std::vector<std::pair<absl::StatusCode, grpc::StatusCode>>& AllCodes() {
  static const auto* codes = new std::vector<std::pair<absl::StatusCode, grpc::StatusCode>>{
      {absl::StatusCode::kOk, grpc::StatusCode::OK},
      {absl::StatusCode::kCancelled, grpc::StatusCode::CANCELLED},
      {absl::StatusCode::kUnknown, grpc::StatusCode::UNKNOWN},
      {absl::StatusCode::kInvalidArgument, grpc::StatusCode::INVALID_ARGUMENT},
      {absl::StatusCode::kDeadlineExceeded, grpc::StatusCode::DEADLINE_EXCEEDED},
      {absl::StatusCode::kNotFound, grpc::StatusCode::NOT_FOUND},
      {absl::StatusCode::kAlreadyExists, grpc::StatusCode::ALREADY_EXISTS},
      {absl::StatusCode::kPermissionDenied, grpc::StatusCode::PERMISSION_DENIED},
      {absl::StatusCode::kResourceExhausted, grpc::StatusCode::RESOURCE_EXHAUSTED},
      {absl::StatusCode::kFailedPrecondition, grpc::StatusCode::FAILED_PRECONDITION},
      {absl::StatusCode::kAborted, grpc::StatusCode::ABORTED},
      {absl::StatusCode::kOutOfRange, grpc::StatusCode::OUT_OF_RANGE},
      {absl::StatusCode::kUnimplemented, grpc::StatusCode::UNIMPLEMENTED},
      {absl::StatusCode::kInternal, grpc::StatusCode::INTERNAL},
      {absl::StatusCode::kUnavailable, grpc::StatusCode::UNAVAILABLE},
      {absl::StatusCode::kDataLoss, grpc::StatusCode::DATA_LOSS},
      {absl::StatusCode::kUnauthenticated, grpc::StatusCode::UNAUTHENTICATED},
  };
  return *codes;
}

TEST(GrpcStatus, CoversAllSeventeenCodes) {
  ASSERT_EQ(AllCodes().size(), 17u);
  for (size_t i = 0; i < AllCodes().size(); ++i) {
    EXPECT_EQ(static_cast<size_t>(AllCodes()[i].first), i);
  }
}

TEST(GrpcStatus, MapsEachCodeToTheSameGrpcCodeAndKeepsTheMessage) {
  for (const auto& [absl_code, grpc_code] : AllCodes()) {
    if (absl_code == absl::StatusCode::kOk) {
      continue;
    }
    const std::string message =
        absl::StrCat("table 't': ", absl::StatusCodeToString(absl_code), " \xce\xbb 100%");
    const grpc::Status s = ToGrpcStatus(absl::Status(absl_code, message));
    EXPECT_EQ(s.error_code(), grpc_code) << absl::StatusCodeToString(absl_code);
    EXPECT_EQ(s.error_message(), message);
    EXPECT_FALSE(s.ok());
  }
}

TEST(GrpcStatus, OkIsOkWithAnEmptyMessage) {
  const grpc::Status s = ToGrpcStatus(absl::OkStatus());
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.error_code(), grpc::StatusCode::OK);
  EXPECT_EQ(s.error_message(), "");
}

TEST(GrpcStatus, ErrorWithAnEmptyMessageStaysAnError) {
  const grpc::Status s = ToGrpcStatus(absl::Status(absl::StatusCode::kUnavailable, ""));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(s.error_message(), "");
}

TEST(GrpcStatus, ALongMessageIsCutToTheBoundOnACharacterBoundary) {
  // 2000 bytes of a two-byte character: a cut at an odd byte would split one.
  std::string text;
  for (int i = 0; i < 1000; ++i) {
    text += "\xc3\xa9";  // U+00E9
  }
  const grpc::Status s = ToGrpcStatus(absl::NotFoundError(text));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_LE(s.error_message().size(), kMaxStatusMessageBytes);
  EXPECT_THAT(s.error_message(), ::testing::EndsWith("... (2000 bytes)"));
  const std::string kept = s.error_message().substr(0, s.error_message().find("..."));
  EXPECT_EQ(kept.size() % 2, 0u);
  EXPECT_EQ(kept, text.substr(0, kept.size()));
}

TEST(GrpcStatus, AShortMessageIsKeptWhole) {
  EXPECT_EQ(ToGrpcStatus(absl::InvalidArgumentError("bad shape")).error_message(), "bad shape");
}

TEST(EchoText, EscapesAndCutsWhatARequestSent) {
  EXPECT_EQ(EchoText("items"), "items");
  EXPECT_EQ(EchoText(std::string("a\nb\xff", 4)), "a\\nb\\xff");
  const std::string echoed = EchoText(std::string(9000, 'x'));
  EXPECT_EQ(echoed, std::string(kMaxEchoBytes, 'x') + "... (9000 bytes)");
}

TEST(ShapeText, ShowsAtMostEightDims) {
  EXPECT_EQ(ShapeText(std::vector<int64_t>{}), "[]");
  EXPECT_EQ(ShapeText(std::vector<int64_t>{2, 3}), "[2, 3]");
  EXPECT_EQ(ShapeText(std::vector<int64_t>(8, 1)), "[1, 1, 1, 1, 1, 1, 1, 1]");
  EXPECT_EQ(ShapeText(std::vector<int64_t>(5000, 7)), "[7, 7, 7, 7, 7, 7, 7, 7, ... (5000 dims)]");
}

}  // namespace
}  // namespace emb::service::grpc_status_test
