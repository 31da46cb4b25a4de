// Integration tests: the real embedding-server binary on loopback, called through emb::client.
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
#include "tests/testing/server_process.h"
#include "tests/testing/table_files.h"

namespace emb {
namespace {

using ::testing::HasSubstr;
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

using HealthStatus = grpc::health::v1::HealthCheckResponse;

// A health Watch call on a server, read one status at a time; cancelled at the end of its scope.
class HealthWatch {
 public:
  HealthWatch(const std::string& target, const std::string& service, absl::Duration timeout)
      : stub_(grpc::health::v1::Health::NewStub(
            grpc::CreateChannel(target, grpc::InsecureChannelCredentials()))) {
    ctx_.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
    grpc::health::v1::HealthCheckRequest request;
    request.set_service(service);
    reader_ = stub_->Watch(&ctx_, request);
  }
  ~HealthWatch() {
    if (!finished_) {
      ctx_.TryCancel();
      (void)reader_->Finish();
    }
  }

  // The next status the server sends; nullopt once the stream has ended.
  std::optional<HealthStatus::ServingStatus> Next() {
    HealthStatus response;
    if (!reader_->Read(&response)) {
      return std::nullopt;
    }
    return response.status();
  }
  // How the call ended (after Next() returned nullopt).
  grpc::Status Finish() {
    finished_ = true;
    return reader_->Finish();
  }

 private:
  std::unique_ptr<grpc::health::v1::Health::Stub> stub_;
  grpc::ClientContext ctx_;
  std::unique_ptr<grpc::ClientReader<HealthStatus>> reader_;
  bool finished_ = false;
};

TEST_F(ServerTest, HealthWatchStreamsServing) {
  HealthWatch watch(server_->target(), "embedding.v1.EmbeddingService", absl::Seconds(10));
  EXPECT_EQ(watch.Next(), HealthStatus::SERVING);
}

TEST_F(ServerTest, HealthWatchOfAnUnknownServiceSaysSoAndStaysOpen) {
  HealthWatch watch(server_->target(), "no.such.Service", absl::Milliseconds(500));
  EXPECT_EQ(watch.Next(), HealthStatus::SERVICE_UNKNOWN);
  EXPECT_EQ(watch.Next(), std::nullopt);  // nothing more until the deadline ends the call
  EXPECT_EQ(watch.Finish().error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
}

// The value of the first sample line of the exposition that starts with `series`.
double Sample(const std::string& metrics, const std::string& series) {
  for (size_t pos = 0; (pos = metrics.find(series, pos)) != std::string::npos; ++pos) {
    if (pos == 0 || metrics[pos - 1] == '\n') {
      const size_t end = metrics.find('\n', pos);
      const std::string line = metrics.substr(pos, end - pos);
      return std::stod(line.substr(line.rfind(' ') + 1));
    }
  }
  return -1;
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

// The demo table of a server started with --demo_table=1000x64 and the default seed.
std::string DemoRows(absl::Span<const int64_t> ids) {
  static const auto* table = new testing::DemoTable(1000, 64, 42);
  return table->Rows(ids);
}

std::vector<int64_t> SmallIds(std::mt19937_64& rng) {
  std::vector<int64_t> ids(64);
  for (auto& id : ids) {
    id = static_cast<int64_t>(rng() % 1000);
  }
  return ids;
}

// Callers keep calling until health says NOT_SERVING (as a load balancer would), and calls made
// while the server drains still succeed; the server then exits 0.
TEST(ServerLifecycle, SigtermDrainsWhileStillServing) {
  auto server = ServerProcess::Start({"--demo_table=1000x64", "--drain_seconds=1"});
  ASSERT_TRUE(server.ok()) << server.status();
  auto client = client::EmbeddingClient::Connect((*server)->target());
  std::atomic<bool> stop{false};
  std::atomic<int> ok{0}, failed{0};
  std::vector<std::thread> callers;
  for (int t = 0; t < 4; ++t) {
    callers.emplace_back([&, t] {
      std::mt19937_64 rng(t);
      while (!stop) {
        const auto ids = SmallIds(rng);
        auto r = client->LookUp("", ids, {}, std::nullopt, absl::Seconds(20));
        if (r.ok() && r->data == DemoRows(ids)) {
          ++ok;
        } else {
          ++failed;
          ADD_FAILURE() << "call failed while draining: " << r.status();
        }
      }
    });
  }
  absl::SleepFor(absl::Milliseconds(200));
  (*server)->Signal(SIGTERM);
  ASSERT_TRUE((*server)->WaitForLog("received SIGTERM", absl::Seconds(10)));
  auto health = client->CheckHealth("", absl::Seconds(5));
  ASSERT_TRUE(health.ok()) << health.status();
  EXPECT_EQ(*health, "NOT_SERVING");
  const int ok_at_drain = ok.load();
  absl::SleepFor(absl::Milliseconds(300));
  EXPECT_GT(ok.load(), ok_at_drain) << "calls must still be served while draining";
  stop = true;
  for (auto& t : callers) {
    t.join();
  }
  EXPECT_EQ((*server)->WaitExit(absl::Seconds(30)), 0) << (*server)->log();
  EXPECT_EQ(failed.load(), 0);
  EXPECT_THAT((*server)->log(), HasSubstr("stopped cleanly"));
}

// The time stamp of the first log line that contains `text`; nullopt when no such line (yet).
// Lines look like "2026-11-30T06:40:12.123456Z I message" (service/common/log.h).
std::optional<absl::Time> LoggedAt(const std::string& log, const std::string& text) {
  const size_t at = log.find(text);
  if (at == std::string::npos) {
    return std::nullopt;
  }
  const size_t newline = log.rfind('\n', at);
  const size_t line_start = newline == std::string::npos ? 0 : newline + 1;
  const std::string stamp = log.substr(line_start, log.find(' ', line_start) - line_start);
  absl::Time t;
  std::string error;
  if (!absl::ParseTime(service::kLogTimeFormat, stamp, &t, &error)) {
    ADD_FAILURE() << "no time stamp in log line: " << log.substr(line_start, 80) << ": " << error;
    return std::nullopt;
  }
  return t;
}

// While the tables load, the port is open and health says NOT_SERVING, to Check and to Watch;
// Watch then streams SERVING once they are loaded. A demo table of 4M x 16 float32 (256 MB) takes
// about a second to make.
//
// "Once they are loaded" is checked against the clock, not against what the test has read of the
// log so far (the log reaches the test later than the answers may): every SERVING answer arrives
// after the time stamp of the line that says the table is loaded, which the server writes before
// it changes its health.
TEST(ServerLifecycle, HealthIsNotServingUntilTheTablesAreLoaded) {
  auto server =
      ServerProcess::Start({"--demo_table=4000000x16"}, absl::Seconds(120), "gRPC listening on");
  ASSERT_TRUE(server.ok()) << server.status();
  std::vector<absl::Time> serving_answers;  // when each SERVING answer arrived
  int not_serving_answers = 0;
  auto record = [&](bool serving) {
    if (serving) {
      serving_answers.push_back(absl::Now());
    } else {
      ++not_serving_answers;
    }
  };

  HealthWatch watch((*server)->target(), "", absl::Seconds(120));
  std::optional<HealthStatus::ServingStatus> watched = watch.Next();
  ASSERT_TRUE(watched.has_value()) << "the Watch ended at once";
  record(*watched == HealthStatus::SERVING);
  auto client = client::EmbeddingClient::Connect((*server)->target());
  for (;;) {
    auto check = client->CheckHealth("", absl::Seconds(10));
    ASSERT_TRUE(check.ok()) << check.status();
    ASSERT_THAT(*check, ::testing::AnyOf("SERVING", "NOT_SERVING"));
    record(*check == "SERVING");
    if (*check == "SERVING") {
      break;
    }
  }
  while (watched != HealthStatus::SERVING) {
    watched = watch.Next();
    ASSERT_TRUE(watched.has_value()) << "the Watch ended before SERVING";
    record(*watched == HealthStatus::SERVING);
  }

  ASSERT_TRUE((*server)->WaitForLog("health SERVING", absl::Seconds(10))) << (*server)->log();
  const std::optional<absl::Time> loaded = LoggedAt((*server)->log(), "table 'demo' loaded");
  ASSERT_TRUE(loaded.has_value()) << (*server)->log();
  for (absl::Time answered : serving_answers) {
    EXPECT_GE(answered, *loaded) << "SERVING before the table was loaded\n" << (*server)->log();
  }
  EXPECT_GT(not_serving_answers, 0) << "the table loaded before any health answer; make it larger";
}

// A Watch stream gets NOT_SERVING when the server starts draining, and is ended by the server at
// shutdown: it does not hold the exit until --shutdown_timeout_seconds.
TEST(ServerLifecycle, SigtermEndsHealthWatchStreams) {
  auto server = ServerProcess::Start(
      {"--demo_table=1000x64", "--drain_seconds=0.2", "--shutdown_timeout_seconds=60"});
  ASSERT_TRUE(server.ok()) << server.status();
  HealthWatch watch((*server)->target(), "embedding.v1.EmbeddingService", absl::Seconds(120));
  EXPECT_EQ(watch.Next(), HealthStatus::SERVING);
  const absl::Time signalled = absl::Now();
  (*server)->Signal(SIGTERM);
  EXPECT_EQ(watch.Next(), HealthStatus::NOT_SERVING);
  EXPECT_EQ(watch.Next(), std::nullopt);
  EXPECT_TRUE(watch.Finish().ok());
  EXPECT_EQ((*server)->WaitExit(absl::Seconds(30)), 0) << (*server)->log();
  EXPECT_LT(absl::Now() - signalled, absl::Seconds(20)) << (*server)->log();
}

// Calls still queued when shutdown starts (a long batching delay holds them) get their rows.
TEST(ServerLifecycle, SigtermAnswersCallsInFlight) {
  auto server = ServerProcess::Start(
      {"--demo_table=1000x64", "--drain_seconds=0", "--max_queue_delay_us=700000"});
  ASSERT_TRUE(server.ok()) << server.status();
  auto client = client::EmbeddingClient::Connect((*server)->target());
  constexpr int kCalls = 8;
  std::mt19937_64 rng(5);
  std::vector<std::vector<int64_t>> ids(kCalls);
  std::vector<absl::StatusOr<client::LookUpResult>> results(kCalls);
  absl::BlockingCounter done(kCalls);
  for (int i = 0; i < kCalls; ++i) {
    ids[i] = SmallIds(rng);
    client::LookUpRequestSpec spec;
    spec.ids = ids[i];
    client->LookUpAsync(spec, absl::Seconds(20), [&, i](absl::StatusOr<client::LookUpResult> r) {
      results[i] = std::move(r);
      done.DecrementCount();
    });
  }
  // Wait until the server has queued all of them, then stop it.
  bool queued = false;
  for (int attempt = 0; attempt < 200 && !queued; ++attempt) {
    auto m = testing::HttpGet((*server)->metrics_port(), "/metrics");
    if (m.ok() && m->find("embedding_queue_ids{table=\"demo\"} " + std::to_string(kCalls * 64)) !=
                      std::string::npos) {
      queued = true;
    } else {
      absl::SleepFor(absl::Milliseconds(5));
    }
  }
  EXPECT_TRUE(queued) << "the calls never showed in embedding_queue_ids";
  (*server)->Signal(SIGTERM);
  done.Wait();
  for (int i = 0; i < kCalls; ++i) {
    ASSERT_TRUE(results[i].ok()) << results[i].status();
    EXPECT_TRUE(results[i]->data == DemoRows(ids[i]));
  }
  EXPECT_EQ((*server)->WaitExit(absl::Seconds(30)), 0) << (*server)->log();
}

// Tables from files: a float16 .npy and a bfloat16 tensor picked out of a .safetensors file,
// the second made the default; rows checked against the files' bytes in every answer type.
TEST(ServerTables, FileTablesServeTheirRowsAndTheChosenDefault) {
  testing::TempDir dir;
  const std::string words = testing::RandomRows(DataType::kFloat16, 700 * 24, 1);
  const std::string items = testing::RandomRows(DataType::kBFloat16, 300 * 40, 2);
  const std::string other = testing::RandomRows(DataType::kFloat32, 5 * 3, 3);
  ASSERT_TRUE(
      testing::WriteFile(dir.File("words.npy"), testing::NpyFile("<f2", {700, 24}, words)).ok());
  ASSERT_TRUE(testing::WriteFile(dir.File("model.safetensors"),
                                 testing::SafetensorsFile({{"other", "F32", {5, 3}, other},
                                                           {"items", "BF16", {300, 40}, items}}))
                  .ok());
  auto server = ServerProcess::Start({"--table=words=" + dir.File("words.npy"),
                                      "--table=items=" + dir.File("model.safetensors") + "#items",
                                      "--default_table=items"});
  ASSERT_TRUE(server.ok()) << server.status();
  auto client = client::EmbeddingClient::Connect((*server)->target());

  auto tables = client->ListTables(kTimeout);
  ASSERT_TRUE(tables.ok()) << tables.status();
  ASSERT_EQ(tables->size(), 2u);
  EXPECT_EQ((*tables)[0].name, "items");
  EXPECT_TRUE((*tables)[0].is_default);
  EXPECT_EQ((*tables)[0].dtype, DataType::kBFloat16);
  EXPECT_EQ((*tables)[0].rows, 300);
  EXPECT_EQ((*tables)[0].dim, 40);
  EXPECT_EQ((*tables)[1].name, "words");
  EXPECT_FALSE((*tables)[1].is_default);
  EXPECT_EQ((*tables)[1].dtype, DataType::kFloat16);

  std::mt19937_64 rng(4);
  struct Case {
    std::string table;  // as requested; "" is the default, items
    const std::string* data;
    DataType type;
    int64_t rows, dim;
  };
  for (const Case& c : {Case{"words", &words, DataType::kFloat16, 700, 24},
                        Case{"", &items, DataType::kBFloat16, 300, 40}}) {
    std::vector<int64_t> ids(50);
    for (int64_t& id : ids) {
      id = static_cast<int64_t>(rng() % c.rows);
    }
    ids[0] = c.rows - 1;
    for (DataType out : {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16}) {
      auto r = client->LookUp(c.table, ids, {}, out, kTimeout);
      ASSERT_TRUE(r.ok()) << r.status();
      std::string want(ids.size() * c.dim * ElementSize(out), '\0');
      kernels::CpuGather(reinterpret_cast<const std::byte*>(c.data->data()), c.type, c.dim, ids,
                         out, reinterpret_cast<std::byte*>(want.data()));
      EXPECT_TRUE(r->data == want) << "table '" << c.table << "' as " << DataTypeName(out);
    }
  }
  EXPECT_THAT((*server)->log(), HasSubstr("table 'words' loaded: 700 rows x 24 dims, float16"));
  EXPECT_THAT((*server)->log(), HasSubstr("table 'items' loaded: 300 rows x 40 dims, bfloat16"));
}

// Waits until the server's metrics show `series` with `value`; false after about a second.
bool WaitForSample(const ServerProcess& server, const std::string& series, double value) {
  for (int attempt = 0; attempt < 200; ++attempt) {
    auto m = testing::HttpGet(server.metrics_port(), "/metrics");
    if (m.ok() && Sample(*m, series) == value) {
      return true;
    }
    absl::SleepFor(absl::Milliseconds(5));
  }
  return false;
}

// A long batching delay holds the first call in the queue; the queue then has no room.
TEST(ServerQueue, FullQueueIsResourceExhaustedAtOnce) {
  auto server =
      ServerProcess::Start({"--demo_table=1000x8", "--max_queue_delay_us=500000",
                            "--max_queue_ids=150", "--max_batch_ids=150", "--max_request_ids=100"});
  ASSERT_TRUE(server.ok()) << server.status();
  auto client = client::EmbeddingClient::Connect((*server)->target());
  client::LookUpRequestSpec first;
  first.ids.assign(100, 7);
  absl::Notification first_done;
  absl::StatusOr<client::LookUpResult> first_result;
  client->LookUpAsync(first, absl::Seconds(20), [&](absl::StatusOr<client::LookUpResult> r) {
    first_result = std::move(r);
    first_done.Notify();
  });
  ASSERT_TRUE(WaitForSample(**server, "embedding_queue_ids{table=\"demo\"}", 100));
  const std::vector<int64_t> second(100, 3);  // 100 + 100 > 150
  ExpectError(client->LookUp("", second, {}, std::nullopt, kTimeout),
              absl::StatusCode::kResourceExhausted, {"queue is full", "limit 150"});
  first_done.WaitForNotification();
  ASSERT_TRUE(first_result.ok()) << first_result.status();
  auto m = testing::HttpGet((*server)->metrics_port(), "/metrics");
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(Sample(*m, "embedding_rejected_ids_total{reason=\"queue_full\",table=\"demo\"}"), 100);
}

// A call whose deadline passes while it waits for its batch is dropped, not gathered.
TEST(ServerQueue, CallPastItsDeadlineIsDroppedAndCounted) {
  auto server = ServerProcess::Start({"--demo_table=1000x8", "--max_queue_delay_us=400000"});
  ASSERT_TRUE(server.ok()) << server.status();
  auto client = client::EmbeddingClient::Connect((*server)->target());
  const std::vector<int64_t> ids = {1, 2, 3};
  auto r = client->LookUp("", ids, {}, std::nullopt, absl::Milliseconds(50));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded) << r.status();
  // The server drops it when its batch forms, 400 ms after it arrived.
  EXPECT_TRUE(
      WaitForSample(**server,
                    "embedding_dropped_requests_total{reason=\"deadline\",table=\"demo\"}", 1) ||
      WaitForSample(**server,
                    "embedding_dropped_requests_total{reason=\"cancelled\",table=\"demo\"}", 1))
      << (*server)->log();
  auto m = testing::HttpGet((*server)->metrics_port(), "/metrics");
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(Sample(*m, "embedding_ids_total{table=\"demo\"}"), 0)
      << "a dropped call is not gathered";
}

TEST(ServerLifecycle, BrokenTableFileStopsStartUpBeforeThePortOpens) {
  const std::string path = ::testing::TempDir() + "/broken.npy";
  FILE* f = fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  fputs("not a numpy file at all", f);
  fclose(f);
  const ServerProcess::Exit exit = ServerProcess::RunToExit({"--table=words=" + path});
  EXPECT_NE(exit.code, 0);
  EXPECT_THAT(exit.log, HasSubstr(path + ": bad magic"));
  EXPECT_THAT(exit.log, ::testing::Not(HasSubstr("listening")));
}

TEST(ServerLifecycle, HelpListsTheFlags) {
  const ServerProcess::Exit exit = ServerProcess::RunToExit({"--help"});
  for (const char* flag :
       {"--table", "--default_table", "--demo_table", "--grpc_address", "--metrics_address",
        "--device", "--max_batch_ids", "--max_queue_delay_us", "--max_queue_ids",
        "--max_request_ids", "--max_response_bytes", "--inflight_batches", "--completion_poll_us",
        "--zero_copy_max_bytes", "--drain_seconds", "--shutdown_timeout_seconds",
        "--max_concurrent_streams"}) {
    EXPECT_THAT(exit.log, HasSubstr(std::string(flag).substr(2) + " ")) << flag;
  }
}

TEST(ServerLifecycle, BadGpuSettingsStopStartUpNamingTheFlag) {
  for (const auto& [flag, message] : std::vector<std::pair<std::string, std::string>>{
           {"--inflight_batches=0", "--inflight_batches must be at least 1"},
           {"--zero_copy_max_bytes=-1", "--zero_copy_max_bytes must not be negative"}}) {
    const ServerProcess::Exit exit = ServerProcess::RunToExit({"--demo_table=100x4", flag});
    EXPECT_NE(exit.code, 0) << flag;
    EXPECT_THAT(exit.log, HasSubstr(message)) << flag;
  }
}

}  // namespace
}  // namespace emb
