// Bad input against the real server, while good callers share its batches: every bad call gets
// its documented code and a message naming the problem; every good call gets exactly its rows;
// the server keeps serving. Bad calls go out as raw bytes through a generic stub, so that the
// matrix can hold bodies no typed client would send.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "client/embedding_client.h"
#include "gmock/gmock.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tests/testing/demo_table.h"
#include "tests/testing/metrics_text.h"
#include "tests/testing/server_process.h"

namespace emb::bad_input_test {
namespace {

using ::testing::HasSubstr;
using testing::ServerProcess;

constexpr int64_t kRows = 3000;
constexpr int64_t kDim = 32;
constexpr uint64_t kSeed = 3;
constexpr int64_t kMaxRequestIds = 1000;
constexpr int64_t kMaxResponseBytes = 64000;  // 500 float32 rows
constexpr int64_t kMaxFeatureCallIds = 500;
// The server's receive limit: the larger of --max_request_ids x 10 bytes and
// --max_feature_call_ids x 16, + 64 KiB of room (service/server/server.cc).
constexpr int64_t kMaxReceiveBytes =
    std::max(kMaxRequestIds * 10, kMaxFeatureCallIds * 16) + (64 << 10);

struct BadCall {
  std::string what;
  std::string body;  // the serialized request, or any bytes
  grpc::StatusCode code;
  std::vector<std::string> message_parts;
  bool gzip = false;  // the client compresses the message
};

// The most bytes of a status message the server sends (service/rpc/grpc_status.h).
constexpr size_t kMaxStatusMessageBytes = 1024;

std::string Serialize(const embedding::v1::LookUpRequest& r) { return r.SerializeAsString(); }

embedding::v1::LookUpRequest Request(std::vector<int64_t> ids, std::vector<int64_t> shape = {}) {
  embedding::v1::LookUpRequest r;
  r.mutable_ids()->Assign(ids.begin(), ids.end());
  r.mutable_shape()->Assign(shape.begin(), shape.end());
  return r;
}

std::vector<BadCall> Matrix() {
  const int64_t max = std::numeric_limits<int64_t>::max();
  std::vector<BadCall> m;
  {
    auto r = Request({1, 2});
    r.set_table("nope");
    m.push_back({"unknown table", Serialize(r), grpc::NOT_FOUND, {"'nope'", "demo"}});
  }
  m.push_back({"negative id",
               Serialize(Request({1, -4, 2})),
               grpc::INVALID_ARGUMENT,
               {"ids[1] = -4", "negative"}});
  m.push_back({"id = rows",
               Serialize(Request({0, kRows})),
               grpc::OUT_OF_RANGE,
               {"ids[1] = 3000", "'demo'", "3000 rows"}});
  m.push_back({"id = 2^63-1",
               Serialize(Request({max})),
               grpc::OUT_OF_RANGE,
               {absl::StrCat("ids[0] = ", max), "out of range"}});
  m.push_back({"shape product != len(ids)",
               Serialize(Request({1, 2, 3}, {2, 2})),
               grpc::INVALID_ARGUMENT,
               {"[2, 2]", "holds 4 ids", "ids has 3"}});
  m.push_back({"negative dim",
               Serialize(Request({1, 2}, {-1, -2})),
               grpc::INVALID_ARGUMENT,
               {"shape[0] = -1", "negative"}});
  m.push_back({"overflowing dims",
               Serialize(Request({1}, {int64_t{1} << 40, int64_t{1} << 40})),
               grpc::INVALID_ARGUMENT,
               {"overflows int64"}});
  m.push_back({"too many ids",
               Serialize(Request(std::vector<int64_t>(kMaxRequestIds + 1, 1))),
               grpc::INVALID_ARGUMENT,
               {"1001 ids", "1000", "--max_request_ids"}});
  m.push_back({"answer over --max_response_bytes",
               Serialize(Request(std::vector<int64_t>(501, 1))),
               grpc::INVALID_ARGUMENT,
               {"64128 bytes", "64000", "--max_response_bytes"}});
  {
    auto r = Request({1});
    r.set_dtype(static_cast<embedding::v1::DataType>(7));
    m.push_back(
        {"unknown dtype value", Serialize(r), grpc::INVALID_ARGUMENT, {"dtype 7", "FLOAT32"}});
  }
  m.push_back({"a body that is not a LookUpRequest",
               std::string("\xff\xff\xff\xff", 4),
               grpc::INVALID_ARGUMENT,
               {"not a LookUpRequest"}});
  {
    auto r = Request({1, 2});
    r.set_table(std::string(9000, 'x'));
    m.push_back({"a table name of 9000 bytes",
                 Serialize(r),
                 grpc::NOT_FOUND,
                 {"'xxxxxxxx", "(9000 bytes)", "demo"}});
  }
  {
    std::vector<int64_t> shape(5000, 1);
    shape.back() = 3;
    m.push_back({"a shape of 5000 dims",
                 Serialize(Request({1}, shape)),
                 grpc::INVALID_ARGUMENT,
                 {"[1, 1, 1, 1, 1, 1, 1, 1, ... (5000 dims)]", "holds 3 ids", "ids has 1"}});
  }
  m.push_back({"a gzip-compressed request",
               Serialize(Request({1, 2})),
               grpc::UNIMPLEMENTED,
               {"gzip"},
               /*gzip=*/true});
  m.push_back({"a message over the receive limit",
               std::string(kMaxReceiveBytes + 1, '\x10'),
               grpc::RESOURCE_EXHAUSTED,
               {"larger than max"}});
  return m;
}

// Calls LookUp with `body` as the request's bytes, gzip-compressed where asked.
grpc::Status CallRaw(grpc::GenericStub& stub, const std::string& body, bool gzip = false) {
  grpc::Slice slice(body);
  grpc::ByteBuffer request(&slice, 1);
  grpc::ByteBuffer response;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  if (gzip) {
    ctx.set_compression_algorithm(GRPC_COMPRESS_GZIP);
  }
  grpc::CompletionQueue cq;
  auto call = stub.PrepareUnaryCall(&ctx, "/embedding.v1.EmbeddingService/LookUp", request, &cq);
  call->StartCall();
  grpc::Status status;
  call->Finish(&response, &status, /*tag=*/&status);
  void* tag = nullptr;
  bool ok = false;
  cq.Next(&tag, &ok);
  return status;
}

// Calls LookUp as a client stream that half-closes without sending a message: what a client whose
// message never arrives looks like to the server.
grpc::Status CallWithoutMessage(grpc::GenericStub& stub) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  grpc::CompletionQueue cq;
  auto call = stub.PrepareCall(&ctx, "/embedding.v1.EmbeddingService/LookUp", &cq);
  void* tag = nullptr;
  bool ok = false;
  int step = 0;
  call->StartCall(&step);
  cq.Next(&tag, &ok);
  call->WritesDone(&step);
  cq.Next(&tag, &ok);
  grpc::ByteBuffer response;
  call->Read(&response, &step);
  cq.Next(&tag, &ok);  // fails (!ok): the server sends no message with an error
  grpc::Status status;
  call->Finish(&status, &step);
  cq.Next(&tag, &ok);
  return status;
}

TEST(BadInput, EachBadCallGetsItsCodeWhileGoodCallersInTheSameBatchesGetTheirRows) {
  auto server = ServerProcess::Start({
      absl::StrCat("--demo_table=", kRows, "x", kDim), absl::StrCat("--demo_seed=", kSeed),
      absl::StrCat("--max_request_ids=", kMaxRequestIds),
      absl::StrCat("--max_feature_call_ids=", kMaxFeatureCallIds),
      absl::StrCat("--max_response_bytes=", kMaxResponseBytes),
      "--max_queue_delay_us=2000",  // good calls wait for company, so batches hold several
  });
  ASSERT_TRUE(server.ok()) << server.status();
  const testing::DemoTable reference(kRows, kDim, kSeed);
  auto client = client::EmbeddingClient::Connect((*server)->target());

  // Good callers, all through the bad calls.
  std::atomic<bool> stop{false};
  std::atomic<int> good{0}, wrong{0};
  std::vector<std::thread> callers;
  for (int t = 0; t < 4; ++t) {
    callers.emplace_back([&, t] {
      std::mt19937_64 rng(t);
      std::uniform_int_distribution<int64_t> id(0, kRows - 1);
      while (!stop.load()) {
        std::vector<int64_t> ids(1 + rng() % 64);
        for (int64_t& i : ids) {
          i = id(rng);
        }
        auto r = client->LookUp("", ids, {}, std::nullopt, absl::Seconds(30));
        if (r.ok() && r->data == reference.Rows(ids)) {
          ++good;
        } else {
          ++wrong;
          ADD_FAILURE() << "a good call failed: " << r.status();
        }
      }
    });
  }

  grpc::GenericStub stub(client::CreateInsecureChannel((*server)->target()));
  const std::vector<BadCall> matrix = Matrix();
  constexpr int kRounds = 20;
  for (int round = 0; round < kRounds; ++round) {
    for (const BadCall& bad : matrix) {
      const grpc::Status s = CallRaw(stub, bad.body, bad.gzip);
      EXPECT_EQ(s.error_code(), bad.code) << bad.what << ": " << s.error_message();
      for (const std::string& part : bad.message_parts) {
        EXPECT_THAT(s.error_message(), HasSubstr(part)) << bad.what;
      }
      EXPECT_LE(s.error_message().size(), kMaxStatusMessageBytes) << bad.what;
    }
    const grpc::Status none = CallWithoutMessage(stub);
    EXPECT_EQ(none.error_code(), grpc::INVALID_ARGUMENT) << none.error_message();
    EXPECT_THAT(none.error_message(), HasSubstr("no whole LookUpRequest"));
  }
  stop = true;
  for (auto& t : callers) {
    t.join();
  }
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_GT(good.load(), 0);

  // Still serving, and a good raw call through the same stub works.
  auto health = client->CheckHealth("", absl::Seconds(10));
  ASSERT_TRUE(health.ok()) << health.status();
  EXPECT_EQ(*health, "SERVING");
  EXPECT_TRUE(CallRaw(stub, Serialize(Request({0, kRows - 1}))).ok());
  auto m = testing::HttpGet((*server)->metrics_port(), "/metrics");
  ASSERT_TRUE(m.ok()) << m.status();
  for (const char* reason : {"negative_id", "out_of_range", "bad_shape", "bad_dtype",
                             "too_many_ids", "answer_too_large"}) {
    EXPECT_THAT(*m, HasSubstr(absl::StrCat("embedding_rejected_ids_total{reason=\"", reason)))
        << reason;
  }
}

// A call with no ids that is turned away is counted (issue 41, item 7g): by request in
// embedding_rejected_requests_total, as every refusal is, while it adds 0 to
// embedding_rejected_ids_total.
TEST(BadInput, RefusedCallsWithNoIdsAreCountedByReason) {
  auto server = ServerProcess::Start({"--demo_table=100x4"});
  ASSERT_TRUE(server.ok()) << server.status();
  grpc::GenericStub stub(client::CreateInsecureChannel((*server)->target()));
  auto bad_dtype = Request({});
  bad_dtype.set_dtype(static_cast<embedding::v1::DataType>(7));
  auto bad_bags = Request({});
  bad_bags.set_pooling(embedding::v1::POOLING_SUM);
  bad_bags.add_offsets(0);
  bad_bags.add_offsets(1);
  const std::vector<std::pair<embedding::v1::LookUpRequest, std::string>> calls = {
      {Request({}, {2}), "bad_shape"}, {bad_dtype, "bad_dtype"}, {bad_bags, "bad_bags"}};
  for (const auto& [request, reason] : calls) {
    const grpc::Status s = CallRaw(stub, Serialize(request));
    EXPECT_EQ(s.error_code(), grpc::INVALID_ARGUMENT) << reason << ": " << s.error_message();
  }
  // An empty request is valid (OK, an empty answer): not a refusal.
  EXPECT_TRUE(CallRaw(stub, Serialize(Request({}))).ok());
  auto m = testing::HttpGet((*server)->metrics_port(), "/metrics");
  ASSERT_TRUE(m.ok()) << m.status();
  for (const auto& [request, reason] : calls) {
    EXPECT_EQ(testing::Sample(*m, absl::StrCat("embedding_rejected_requests_total{reason=\"",
                                               reason, "\",table=\"demo\"}")),
              1)
        << reason << "\n"
        << *m;
  }
}

}  // namespace
}  // namespace emb::bad_input_test
