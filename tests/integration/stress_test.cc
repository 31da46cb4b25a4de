// Stress: hundreds of concurrent callers on many connections keep the real server busy for a few
// seconds; every answer is checked row by row, and the server must stay up and exit cleanly.
//
// Two batching regimes: one request per batch (--max_batch_ids = --max_request_ids = the call's
// size, so every call is its own gather: most batches in flight, most completion hand-offs) and
// the default batching. On the GPU backend (EMB_TEST_DEVICE=cuda:0, scripts/gpu-check) this is
// the load under which the server once aborted in absl::Mutex ("bad skip in
// DequeueAllWakeable"); on the CPU backend CI runs it under ThreadSanitizer too.
//
// EMB_STRESS_SECONDS sets how long each case calls (default 3). CTest runs it twice: on the CPU
// backend (label `stress`) and on cuda:0 (label `gpu`, names `gpu.*`; skipped without a GPU).

#include <atomic>
#include <cstdlib>
#include <memory>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/embedding_client.h"
#include "gtest/gtest.h"
#include "tests/testing/demo_table.h"
#include "tests/testing/loaded_server.h"
#include "tests/testing/server_process.h"

namespace emb::stress_test {
namespace {

using testing::ServerProcess;

constexpr int64_t kRows = 20000;
constexpr int64_t kDim = 128;
constexpr uint64_t kSeed = 11;
constexpr int kConnections = 16;
constexpr int kCallers = 256;
constexpr int kIdsPerCall = 16;

absl::Duration StressDuration() {
  const char* env = std::getenv("EMB_STRESS_SECONDS");
  return absl::Seconds(env != nullptr ? std::atof(env) : 3.0);
}

const testing::DemoTable& Reference() {
  static const auto* table = new testing::DemoTable(kRows, kDim, kSeed);
  return *table;
}

// What every caller saw; the first failure's status is kept for the message.
struct Tally {
  std::atomic<int64_t> ok{0};
  std::atomic<int64_t> failed{0};
  std::atomic<int64_t> wrong_rows{0};
  absl::Mutex mu;
  std::string first_failure ABSL_GUARDED_BY(mu);

  void Fail(const absl::Status& s) {
    if (failed.fetch_add(1) == 0) {
      absl::MutexLock lock(&mu);
      first_failure = s.ToString();
    }
  }
};

// One closed-loop caller: starts a call, checks its answer in the completion callback and starts
// the next, until `until`. Signals `finished` after its last answer.
class Caller {
 public:
  Caller(client::EmbeddingClient* client, uint64_t seed, absl::Time until, Tally* tally,
         std::atomic<int>* running, absl::Notification* all_done)
      : client_(client),
        rng_(seed),
        until_(until),
        tally_(tally),
        running_(running),
        all_done_(all_done) {}

  void Start() {
    std::uniform_int_distribution<int64_t> id(0, kRows - 1);
    client::LookUpRequestSpec spec;
    spec.ids.resize(kIdsPerCall);
    for (int64_t& i : spec.ids) {
      i = id(rng_);
    }
    // Every third call asks for bfloat16, so batches of both answer types interleave.
    spec.dtype = calls_++ % 3 == 2 ? DataType::kBFloat16 : DataType::kFloat32;
    client_->LookUpAsync(spec, absl::Seconds(60),
                         [this, ids = spec.ids, type = *spec.dtype](
                             absl::StatusOr<client::LookUpResult> r) { Finish(ids, type, r); });
  }

 private:
  void Finish(const std::vector<int64_t>& ids, DataType type,
              const absl::StatusOr<client::LookUpResult>& r) {
    if (!r.ok()) {
      tally_->Fail(r.status());
    } else if (r->data != Reference().Rows(ids, type)) {
      ++tally_->wrong_rows;
    } else {
      ++tally_->ok;
    }
    if (absl::Now() < until_) {
      Start();
    } else if (running_->fetch_sub(1) == 1) {
      all_done_->Notify();
    }
  }

  client::EmbeddingClient* client_;
  std::mt19937_64 rng_;
  const absl::Time until_;
  Tally* tally_;
  std::atomic<int>* running_;
  absl::Notification* all_done_;
  int64_t calls_ = 0;
};

struct StressCase {
  std::string name;
  std::vector<std::string> flags;
};

// Names the case in test listings (CTest's names come from them).
void PrintTo(const StressCase& c, std::ostream* os) { *os << c.name; }

class StressTest : public ::testing::TestWithParam<StressCase> {};

TEST_P(StressTest, ManyCallersOnManyConnectionsEachGetTheirRows) {
  if (auto missing = testing::TestDeviceMissing()) {
    GTEST_SKIP() << *missing;
  }
  auto server = testing::StartDemoServer(kRows, kDim, kSeed, GetParam().flags);
  ASSERT_TRUE(server.ok()) << server.status();

  const auto clients = testing::ClientsOnOwnConnections(**server, kConnections);
  Tally tally;
  std::atomic<int> running{kCallers};
  absl::Notification all_done;
  const absl::Time until = absl::Now() + StressDuration();
  std::vector<std::unique_ptr<Caller>> callers;
  for (int i = 0; i < kCallers; ++i) {
    callers.push_back(std::make_unique<Caller>(clients[i % kConnections].get(), 1000 + i, until,
                                               &tally, &running, &all_done));
  }
  for (auto& caller : callers) {
    caller->Start();
  }
  // Each caller's last call has a 60 s deadline, so this wait is bounded unless the client hangs.
  ASSERT_TRUE(all_done.WaitForNotificationWithTimeout(StressDuration() + absl::Seconds(120)))
      << (*server)->log();

  {
    absl::MutexLock lock(&tally.mu);
    EXPECT_EQ(tally.failed.load(), 0) << "first failure: " << tally.first_failure;
  }
  EXPECT_EQ(tally.wrong_rows.load(), 0);
  EXPECT_GE(tally.ok.load(), kCallers) << "every caller should have been answered at least once";
  RecordProperty("calls", static_cast<int>(tally.ok.load()));
  std::printf("%s: %lld calls answered with the right rows in %s\n", GetParam().name.c_str(),
              static_cast<long long>(tally.ok.load()),
              absl::FormatDuration(StressDuration()).c_str());

  testing::ExpectHealthyThenCleanExit(**server, clients);
}

INSTANTIATE_TEST_SUITE_P(
    Batching, StressTest,
    ::testing::Values(StressCase{"OneRequestPerBatch",
                                 {absl::StrCat("--max_batch_ids=", kIdsPerCall),
                                  absl::StrCat("--max_request_ids=", kIdsPerCall)}},
                      StressCase{"DefaultBatching", {}}),
    [](const ::testing::TestParamInfo<StressCase>& info) { return info.param.name; });

}  // namespace
}  // namespace emb::stress_test
