// Integration tests of the batching queue: a full queue and a call past its deadline.
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
#include "absl/time/clock.h"
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
#include "tests/testing/metrics_text.h"
#include "tests/testing/server_process.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/table_files.h"

namespace emb::queue_test {
namespace {

using ::testing::HasSubstr;
using testing::Sample;
using testing::ServerProcess;

constexpr absl::Duration kTimeout = absl::Seconds(30);

// Waits until the server's metrics show any of `series` with `value`; false after 30 s.
bool WaitForSample(const ServerProcess& server, const std::vector<std::string>& series,
                   double value) {
  const absl::Time deadline = absl::Now() + kTimeout;
  while (absl::Now() < deadline) {
    auto m = testing::HttpGet(server.metrics_port(), "/metrics");
    if (m.ok()) {
      for (const std::string& s : series) {
        if (Sample(*m, s) == value) {
          return true;
        }
      }
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
  ASSERT_TRUE(WaitForSample(**server, {"embedding_queue_ids{table=\"demo\"}"}, 100));
  const std::vector<int64_t> second(100, 3);  // 100 + 100 > 150
  EXPECT_THAT(
      client->LookUp("", second, {}, std::nullopt, kTimeout),
      testing::StatusIs(absl::StatusCode::kResourceExhausted,
                        ::testing::AllOf(HasSubstr("queue is full"), HasSubstr("limit 150"))));
  first_done.WaitForNotification();
  ASSERT_TRUE(first_result.ok()) << first_result.status();
  auto m = testing::HttpGet((*server)->metrics_port(), "/metrics");
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(Sample(*m, "embedding_rejected_ids_total{reason=\"queue_full\",table=\"demo\"}"), 100);
}

// A call whose deadline passes while it waits for its batch is dropped, not gathered.
TEST(ServerQueue, CallPastItsDeadlineIsDroppedAndCounted) {
  // The batch forms 3 s after the call arrives; the call's deadline is 1 s, time enough to reach
  // the queue on a loaded machine under a sanitizer, and it has passed when the batch forms.
  auto server = ServerProcess::Start({"--demo_table=1000x8", "--max_queue_delay_us=3000000"});
  ASSERT_TRUE(server.ok()) << server.status();
  auto client = client::EmbeddingClient::Connect((*server)->target());
  client::LookUpRequestSpec call;
  call.ids = {1, 2, 3};
  absl::Notification done;
  absl::StatusOr<client::LookUpResult> result;
  client->LookUpAsync(call, absl::Seconds(1), [&](absl::StatusOr<client::LookUpResult> r) {
    result = std::move(r);
    done.Notify();
  });
  ASSERT_TRUE(WaitForSample(**server, {"embedding_queue_ids{table=\"demo\"}"}, 3))
      << "the call did not reach the queue before its deadline\n"
      << (*server)->log();
  done.WaitForNotification();
  EXPECT_EQ(result.status().code(), absl::StatusCode::kDeadlineExceeded) << result.status();
  // The server drops it when its batch forms.
  EXPECT_TRUE(
      WaitForSample(**server,
                    {"embedding_dropped_requests_total{reason=\"deadline\",table=\"demo\"}",
                     "embedding_dropped_requests_total{reason=\"cancelled\",table=\"demo\"}"},
                    1))
      << (*server)->log();
  auto m = testing::HttpGet((*server)->metrics_port(), "/metrics");
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(Sample(*m, "embedding_ids_total{table=\"demo\"}"), 0)
      << "a dropped call is not gathered";
}

}  // namespace
}  // namespace emb::queue_test
