// Integration tests of the server's life: start-up order, SIGTERM drain and shutdown, --help.
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
#include "tests/testing/health_watch.h"
#include "tests/testing/server_process.h"
#include "tests/testing/table_files.h"

namespace emb::lifecycle_test {
namespace {

using ::testing::HasSubstr;
using testing::HealthStatus;
using testing::HealthWatch;
using testing::ServerProcess;

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

// SIGHUP and SIGINT stop the server as SIGTERM does: health NOT_SERVING, the drain, a clean exit
// (a SIGHUP from a closing terminal or a supervisor used to kill it without a drain).
TEST(ServerLifecycle, SighupAndSigintDrainAndStopCleanlyLikeSigterm) {
  for (const auto& [signal, name] : {std::pair{SIGHUP, "SIGHUP"}, std::pair{SIGINT, "SIGINT"}}) {
    auto server = ServerProcess::Start({"--demo_table=1000x8", "--drain_seconds=0"});
    ASSERT_TRUE(server.ok()) << server.status();
    (*server)->Signal(signal);
    EXPECT_EQ((*server)->WaitExit(absl::Seconds(30)), 0) << name << "\n" << (*server)->log();
    EXPECT_THAT((*server)->log(),
                HasSubstr(std::string("received ") + name + ": health NOT_SERVING"));
    EXPECT_THAT((*server)->log(), HasSubstr("stopped cleanly")) << name;
  }
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

// --drain_seconds=0 (issue 40: Ctrl-C took the default drain of 5 s): SIGINT, Ctrl-C's signal, ends
// the server without a drain. Judged by the server's own time stamps: from the signal to "stopped
// cleanly" under the default drain. Not milliseconds: the metrics port's civetweb stops only when
// its listener thread next looks at its stop flag, which it does every 2 s (its poll timeout), so
// the shutdown takes 0.5 to 2 s, measured.
TEST(ServerLifecycle, SigintWithNoDrainStopsAtOnce) {
  auto server = ServerProcess::Start({"--demo_table=1000x8", "--drain_seconds=0"});
  ASSERT_TRUE(server.ok()) << server.status();
  (*server)->Signal(SIGINT);
  ASSERT_EQ((*server)->WaitExit(absl::Seconds(30)), 0) << (*server)->log();
  const std::string log = (*server)->log();
  const std::optional<absl::Time> received = LoggedAt(log, "received SIGINT");
  const std::optional<absl::Time> stopped = LoggedAt(log, "stopped cleanly");
  ASSERT_TRUE(received.has_value() && stopped.has_value()) << log;
  EXPECT_LT(*stopped - *received, absl::Seconds(4)) << log;
  EXPECT_THAT(log, HasSubstr("serving on for 0 s")) << log;
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
  for (const char* flag : {"--table",
                           "--default_table",
                           "--demo_table",
                           "--grpc_address",
                           "--metrics_address",
                           "--device",
                           "--max_batch_ids",
                           "--max_queue_delay_us",
                           "--max_queue_ids",
                           "--max_request_ids",
                           "--max_response_bytes",
                           "--inflight_batches",
                           "--completion_poll_us",
                           "--zero_copy_max_bytes",
                           "--drain_seconds",
                           "--shutdown_timeout_seconds",
                           "--max_concurrent_streams",
                           "--answer_threads",
                           "--inline_batches",
                           "--answer_pool_bytes"}) {
    EXPECT_THAT(exit.log, HasSubstr(std::string(flag).substr(2) + " ")) << flag;
  }
  // What a developer's Ctrl-C wants (issue 40).
  EXPECT_THAT(exit.log, HasSubstr("0: shut down at once"));
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
}  // namespace emb::lifecycle_test
