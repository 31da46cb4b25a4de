// Integration tests of the API: a real embedding-server binary on loopback serving a demo table,
// called through emb::client: lookups in every dtype, errors, ListTables, health, metrics.
#include <signal.h>

#include <atomic>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <regex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_split.h"
#include "absl/synchronization/blocking_counter.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "client/bench.h"
#include "client/embedding_client.h"
#include "gmock/gmock.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "kernels/cpu_gather.h"
#include "service/common/log.h"
#include "tests/testing/demo_table.h"
#include "tests/testing/health_watch.h"
#include "tests/testing/metrics_text.h"
#include "tests/testing/server_process.h"
#include "tests/testing/table_files.h"

namespace emb::server_test {
namespace {

using ::testing::HasSubstr;
using testing::HealthStatus;
using testing::HealthWatch;
using testing::Sample;
using testing::ServerProcess;

constexpr int64_t kRows = 5000;
constexpr int64_t kDim = 300;
constexpr uint64_t kSeed = 7;
constexpr absl::Duration kTimeout = absl::Seconds(30);

// The demo table the server serves, made in-process from the same seed: the reference rows.
std::string Expected(absl::Span<const int64_t> ids, DataType out_type) {
  static const auto* table = new testing::DemoTable(kRows, kDim, kSeed);
  return table->Rows(ids, out_type);
}

std::vector<int64_t> RandomIds(std::mt19937_64& rng, size_t n) {
  std::uniform_int_distribution<int64_t> dist(0, kRows - 1);
  std::vector<int64_t> ids(n);
  for (int64_t& id : ids) {
    id = dist(rng);
  }
  return ids;
}

class ServerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto server = ServerProcess::Start({
        "--demo_table=" + std::to_string(kRows) + "x" + std::to_string(kDim),
        "--demo_seed=" + std::to_string(kSeed),
        "--max_request_ids=4096",
        "--max_batch_ids=8192",
        "--max_response_bytes=3000000",
        "--max_queue_delay_us=200",
    });
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = server->release();
    client_ = client::EmbeddingClient::Connect(server_->target()).release();
  }
  static void TearDownTestSuite() {
    delete client_;
    delete server_;
  }

  static ServerProcess* server_;
  static client::EmbeddingClient* client_;
};

ServerProcess* ServerTest::server_ = nullptr;
client::EmbeddingClient* ServerTest::client_ = nullptr;

TEST_F(ServerTest, LookUpReturnsTheRowsInEveryDtype) {
  std::mt19937_64 rng(1);
  std::vector<int64_t> ids = RandomIds(rng, 6 * 50);
  ids[0] = 0;
  ids[1] = kRows - 1;
  ids[2] = ids[3];  // a duplicate
  for (DataType t : {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16}) {
    const std::vector<int64_t> shape = {6, 50};
    auto result = client_->LookUp("", ids, shape, t, kTimeout);
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_EQ(result->shape, (std::vector<int64_t>{6, 50, kDim}));
    EXPECT_EQ(result->dtype, t);
    const std::string expected = Expected(ids, t);
    ASSERT_EQ(result->data.size(), expected.size());
    EXPECT_TRUE(result->data == expected) << "rows differ for " << DataTypeName(t);
  }
}

TEST_F(ServerTest, UnspecifiedDtypeIsTheTablesOwnAndEmptyShapeIsFlat) {
  const std::vector<int64_t> ids = {4, 3, 2};
  auto result = client_->LookUp("demo", ids, {}, std::nullopt, kTimeout);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->shape, (std::vector<int64_t>{3, kDim}));
  EXPECT_EQ(result->dtype, DataType::kFloat32);
  EXPECT_TRUE(result->data == Expected(ids, DataType::kFloat32));
}

TEST_F(ServerTest, ConcurrentCallersEachGetTheirOwnRows) {
  constexpr int kThreads = 8;
  constexpr int kCallsPerThread = 40;
  std::atomic<int> mismatches{0};
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(100 + t);
      for (int i = 0; i < kCallsPerThread; ++i) {
        const auto ids = RandomIds(rng, 1 + rng() % 200);
        const DataType type = static_cast<DataType>(1 + rng() % 3);
        auto result = client_->LookUp("", ids, {}, type, kTimeout);
        if (!result.ok()) {
          ++failures;
        } else if (result->data != Expected(ids, type)) {
          ++mismatches;
        }
      }
    });
  }
  for (auto& t : threads) {
    t.join();
  }
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(mismatches.load(), 0);
}

TEST_F(ServerTest, EmptyIdsAnswerOkAndEmpty) {
  auto result = client_->LookUp("", {}, {}, std::nullopt, kTimeout);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_TRUE(result->data.empty());
  EXPECT_EQ(result->shape, (std::vector<int64_t>{0, kDim}));
  const std::vector<int64_t> shape = {0, 5};
  result = client_->LookUp("", {}, shape, std::nullopt, kTimeout);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->shape, (std::vector<int64_t>{0, 5, kDim}));
}

void ExpectError(const absl::StatusOr<client::LookUpResult>& r, absl::StatusCode code,
                 const std::vector<std::string>& parts) {
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), code) << r.status();
  for (const std::string& p : parts) {
    EXPECT_THAT(std::string(r.status().message()), HasSubstr(p));
  }
}

TEST_F(ServerTest, UnknownTableIsNotFound) {
  const std::vector<int64_t> ids = {1};
  ExpectError(client_->LookUp("nope", ids, {}, std::nullopt, kTimeout), absl::StatusCode::kNotFound,
              {"'nope'", "demo"});
}

TEST_F(ServerTest, NegativeIdIsInvalidArgumentNamingPositionAndValue) {
  const std::vector<int64_t> ids = {1, 2, -5};
  ExpectError(client_->LookUp("", ids, {}, std::nullopt, kTimeout),
              absl::StatusCode::kInvalidArgument, {"ids[2]", "-5", "negative"});
}

TEST_F(ServerTest, IdPastTheTableIsOutOfRangeNamingPositionValueAndRows) {
  const std::vector<int64_t> ids = {1, kRows};
  ExpectError(client_->LookUp("", ids, {}, std::nullopt, kTimeout), absl::StatusCode::kOutOfRange,
              {"ids[1]", std::to_string(kRows), "'demo'", std::to_string(kRows) + " rows"});
}

TEST_F(ServerTest, ShapeErrorsAreInvalidArgument) {
  const std::vector<int64_t> ids = {1, 2, 3, 4, 5, 6};
  const std::vector<int64_t> wrong = {4, 2};
  ExpectError(client_->LookUp("", ids, wrong, std::nullopt, kTimeout),
              absl::StatusCode::kInvalidArgument, {"[4, 2]", "8", "6"});
  const std::vector<int64_t> negative = {-2, -3};
  ExpectError(client_->LookUp("", ids, negative, std::nullopt, kTimeout),
              absl::StatusCode::kInvalidArgument, {"shape[0]", "-2", "negative"});
  const std::vector<int64_t> overflow = {int64_t{1} << 40, int64_t{1} << 40, 0};
  ExpectError(client_->LookUp("", ids, overflow, std::nullopt, kTimeout),
              absl::StatusCode::kInvalidArgument, {"overflows"});
}

TEST_F(ServerTest, TooManyIdsIsInvalidArgumentStatingTheLimit) {
  const std::vector<int64_t> ids(4097, 1);
  ExpectError(client_->LookUp("", ids, {}, std::nullopt, kTimeout),
              absl::StatusCode::kInvalidArgument, {"4097", "4096", "--max_request_ids"});
}

TEST_F(ServerTest, AnswerOverTheSizeLimitIsInvalidArgumentStatingTheLimit) {
  // 2500 ids x 300 x 4 bytes = 3,000,000 + ... > 3,000,000; as bfloat16 it fits.
  const std::vector<int64_t> ids(2501, 1);
  ExpectError(client_->LookUp("", ids, {}, DataType::kFloat32, kTimeout),
              absl::StatusCode::kInvalidArgument, {"3001200", "3000000", "--max_response_bytes"});
  EXPECT_TRUE(client_->LookUp("", ids, {}, DataType::kBFloat16, kTimeout).ok());
}

TEST_F(ServerTest, BadRequestDoesNotDisturbOthers) {
  std::mt19937_64 rng(9);
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 r(200 + t);
      for (int i = 0; i < 30; ++i) {
        auto ids = RandomIds(r, 64);
        if (t % 2 == 1) {
          ids[r() % ids.size()] = kRows + 3;  // bad
          if (client_->LookUp("", ids, {}, std::nullopt, kTimeout).status().code() !=
              absl::StatusCode::kOutOfRange) {
            ++wrong;
          }
        } else {
          auto res = client_->LookUp("", ids, {}, std::nullopt, kTimeout);
          if (!res.ok() || res->data != Expected(ids, DataType::kFloat32)) {
            ++wrong;
          }
        }
      }
    });
  }
  for (auto& t : threads) {
    t.join();
  }
  EXPECT_EQ(wrong.load(), 0);
}

TEST_F(ServerTest, ListTablesDescribesTheDemoTable) {
  auto tables = client_->ListTables(kTimeout);
  ASSERT_TRUE(tables.ok()) << tables.status();
  ASSERT_EQ(tables->size(), 1u);
  const client::TableInfo& t = tables->front();
  EXPECT_EQ(t.name, "demo");
  EXPECT_EQ(t.rows, kRows);
  EXPECT_EQ(t.dim, kDim);
  EXPECT_EQ(t.dtype, DataType::kFloat32);
  EXPECT_EQ(t.device, ServerProcess::TestDevice());
  EXPECT_TRUE(t.is_default);
  EXPECT_FALSE(t.host_tier);  // it fits: every row on the device (or in host memory on the CPU)
  EXPECT_EQ(t.cache_rows, 0);
  // On a list of devices (EMB_TEST_DEVICE=cpu,cpu), one part a device, together all the rows.
  const std::vector<std::string> devices = absl::StrSplit(ServerProcess::TestDevice(), ',');
  if (devices.size() > 1) {
    ASSERT_EQ(t.parts.size(), devices.size());
    EXPECT_THAT(t.placement, ::testing::AnyOf("replicas", "rows"));
    int64_t rows = 0;
    for (size_t k = 0; k < devices.size(); ++k) {
      EXPECT_EQ(t.parts[k].device, devices[k]);
      rows += t.parts[k].rows;
    }
    EXPECT_EQ(rows, t.placement == "rows" ? kRows : kRows * static_cast<int64_t>(devices.size()));
  } else {
    EXPECT_TRUE(t.parts.empty());
  }
  if (ServerProcess::TestOnCpu()) {
    EXPECT_EQ(t.device_bytes, 0);
  } else {
    EXPECT_GE(t.device_bytes, t.bytes);  // its rows and its batch buffers
  }
}

TEST_F(ServerTest, HealthIsServingForServerAndService) {
  for (const char* service : {"", "embedding.v1.EmbeddingService"}) {
    auto status = client_->CheckHealth(service, kTimeout);
    ASSERT_TRUE(status.ok()) << status.status();
    EXPECT_EQ(*status, "SERVING") << "service '" << service << "'";
  }
  EXPECT_EQ(client_->CheckHealth("no.such.Service", kTimeout).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(ServerTest, HealthWatchStreamsServing) {
  HealthWatch watch(server_->target(), "embedding.v1.EmbeddingService", absl::Seconds(10));
  EXPECT_EQ(watch.Next(), HealthStatus::SERVING);
}

TEST_F(ServerTest, HealthWatchOfAnUnknownServiceSaysSoAndStaysOpen) {
  // The deadline leaves the first answer time under ThreadSanitizer and a loaded machine (500 ms
  // did not, once, in CI's TSan run); the call must then stay open until it ends.
  HealthWatch watch(server_->target(), "no.such.Service", absl::Seconds(3));
  EXPECT_EQ(watch.Next(), HealthStatus::SERVICE_UNKNOWN);
  EXPECT_EQ(watch.Next(), std::nullopt);  // nothing more until the deadline ends the call
  EXPECT_EQ(watch.Finish().error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
}

TEST_F(ServerTest, BenchCountsEveryCallWithCallbacksAndWithBlockingThreads) {
  for (bool blocking : {false, true}) {
    client::BenchConfig config;
    config.target = server_->target();
    config.concurrency = 3;
    config.blocking = blocking;
    config.requests = 60;
    config.warmup = absl::ZeroDuration();
    config.ids_per_request = 7;
    absl::StatusOr<client::BenchReport> report = client::RunBench(config);
    ASSERT_TRUE(report.ok()) << report.status();
    EXPECT_EQ(report->requests, 60) << "blocking " << blocking;
    EXPECT_EQ(report->codes, (std::map<std::string, int64_t>{{"OK", 60}}));
    EXPECT_EQ(report->ok_ids, 60 * 7);
    EXPECT_EQ(report->payload_bytes, int64_t{60} * 7 * kDim * sizeof(float));
    EXPECT_EQ(report->latency.count, 60);
    EXPECT_GT(report->latency.p50, absl::ZeroDuration());
  }
}

TEST_F(ServerTest, MetricsCountTheTraffic) {
  auto before = testing::HttpGet(server_->metrics_port(), "/metrics");
  ASSERT_TRUE(before.ok()) << before.status();
  const double ids_before = std::max(0.0, Sample(*before, "embedding_ids_total{table=\"demo\"}"));
  const std::string ok_series =
      "grpc_server_handled_total{grpc_code=\"OK\",grpc_method=\"LookUp\","
      "grpc_service=\"embedding.v1.EmbeddingService\",grpc_type=\"unary\"}";
  const double ok_before = std::max(0.0, Sample(*before, ok_series));

  std::mt19937_64 rng(3);
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(client_->LookUp("", RandomIds(rng, 17), {}, std::nullopt, kTimeout).ok());
  }
  const std::vector<int64_t> bad = {1, kRows};
  ASSERT_FALSE(client_->LookUp("", bad, {}, std::nullopt, kTimeout).ok());

  auto after = testing::HttpGet(server_->metrics_port(), "/metrics");
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(Sample(*after, "embedding_ids_total{table=\"demo\"}"), ids_before + 170);
  EXPECT_EQ(Sample(*after, ok_series), ok_before + 10);
  EXPECT_GE(Sample(*after, "embedding_rejected_ids_total{reason=\"out_of_range\",table=\"demo\"}"),
            2);
  const std::string device = ServerProcess::TestDevice();
  EXPECT_EQ(Sample(*after, "embedding_table_info{device=\"" + device +
                               "\",dtype=\"float32\",table=\"demo\"}"),
            1);
  EXPECT_EQ(Sample(*after, "embedding_table_rows{table=\"demo\"}"), kRows);
  for (const std::string& name : std::vector<std::string>{
           "embedding_request_duration_seconds_bucket{code=\"OK\",method=\"LookUp\",le=\"1e-05\"}",
           "embedding_queue_wait_seconds_count{table=\"demo\"}",
           "embedding_gather_duration_seconds_count{device=\"" + device + "\",table=\"demo\"}",
           "embedding_batch_ids_count{table=\"demo\"}",
           "embedding_batch_requests_count{table=\"demo\"}",
           "embedding_dropped_requests_total{reason=\"deadline\",table=\"demo\"}",
           "embedding_queue_ids{table=\"demo\"}", "embedding_inflight_batches{table=\"demo\"}",
           "grpc_server_started_total{grpc_method=\"LookUp\"",
           "grpc_server_handling_seconds_count{grpc_method=\"LookUp\""}) {
    EXPECT_GE(Sample(*after, name), 0) << name << " missing from\n" << *after;
  }
}

}  // namespace
}  // namespace emb::server_test
