// Large answers under concurrency: many callers on several connections each ask, in turn, for
// answers of over 1 MiB and for a few rows, in every answer type, and every answer is checked
// byte for byte. Answers are written into pooled buffers that gRPC sends from and returns to the
// pool when it has sent them; a buffer handed to a second call while gRPC still sent it would
// give some caller another caller's rows.
//
// CTest runs it on the CPU backend and on cuda:0 (names `gpu.*`, label `gpu`; skipped without a
// GPU), with the default answer threads and with more answer threads than cores, so that the
// calls of one batch are finished (their large answers sent) on several threads at once.

#include <atomic>
#include <cstdint>
#include <memory>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "client/embedding_client.h"
#include "gtest/gtest.h"
#include "kernels/data_type.h"
#include "tests/testing/demo_table.h"
#include "tests/testing/loaded_server.h"
#include "tests/testing/server_process.h"

namespace emb::large_answer_test {
namespace {

using testing::ServerProcess;

constexpr int64_t kRows = 4096;
constexpr int64_t kDim = 768;
constexpr uint64_t kSeed = 29;
constexpr int kConnections = 6;
constexpr int kCallers = 24;
// Under a sanitizer half the calls (each large answer costs about ten times as much there): every
// caller still has large and small answers of every type in flight beside the others'.
constexpr int kCallsEach = testing::kSanitizedBuild ? 6 : 12;
// 2 MiB and more in every type: 768 * 2 bytes * 1400 ids = 2.05 MiB at 16 bits, 4.1 at 32.
constexpr int64_t kLargeIds = 1400;

const testing::DemoTable& Reference() {
  static const auto* table = new testing::DemoTable(kRows, kDim, kSeed);
  return *table;
}

struct Tally {
  std::atomic<int64_t> ok{0};
  std::atomic<int64_t> large{0};
  std::atomic<int64_t> wrong_rows{0};
  std::atomic<int64_t> failed{0};
  absl::Mutex mu;
  std::string first_problem ABSL_GUARDED_BY(mu);

  void Note(const std::string& what) {
    absl::MutexLock lock(&mu);
    if (first_problem.empty()) {
      first_problem = what;
    }
  }
};

// A closed-loop caller: kCallsEach calls, alternating large and small answers and cycling
// through the answer types; each answer is checked in its callback, which starts the next call.
class Caller {
 public:
  Caller(client::EmbeddingClient* client, int index, Tally* tally, std::atomic<int>* running,
         absl::Notification* all_done)
      : client_(client),
        index_(index),
        rng_(1000 + index),
        tally_(tally),
        running_(running),
        all_done_(all_done) {}

  void Start() {
    // Callers start at different points of the cycle, so that large and small answers of every
    // type are in flight at once.
    const int step = calls_ + index_;
    const bool large = step % 2 == 0;
    const DataType type = kAllDataTypes[(step / 2) % 3];
    std::uniform_int_distribution<int64_t> id(0, kRows - 1);
    std::uniform_int_distribution<int64_t> small(1, 20);
    client::LookUpRequestSpec spec;
    spec.ids.resize(static_cast<size_t>(large ? kLargeIds + index_ : small(rng_)));
    for (int64_t& i : spec.ids) {
      i = id(rng_);
    }
    spec.dtype = type;
    ++calls_;
    client_->LookUpAsync(
        spec, absl::Seconds(120),
        [this, ids = spec.ids, type, large](absl::StatusOr<client::LookUpResult> r) {
          Finish(ids, type, large, r);
        });
  }

 private:
  void Finish(const std::vector<int64_t>& ids, DataType type, bool large,
              const absl::StatusOr<client::LookUpResult>& r) {
    if (!r.ok()) {
      ++tally_->failed;
      tally_->Note(r.status().ToString());
    } else if (r->data != Reference().Rows(ids, type)) {
      ++tally_->wrong_rows;
      tally_->Note(absl::StrCat("caller ", index_, ": wrong rows in a ", DataTypeName(type),
                                " answer of ", ids.size(), " ids"));
    } else {
      ++tally_->ok;
      tally_->large += large ? 1 : 0;
    }
    if (calls_ < kCallsEach) {
      Start();
    } else if (running_->fetch_sub(1) == 1) {
      all_done_->Notify();
    }
  }

  client::EmbeddingClient* client_;
  const int index_;
  std::mt19937_64 rng_;
  Tally* tally_;
  std::atomic<int>* running_;
  absl::Notification* all_done_;
  int calls_ = 0;  // only this caller's callbacks touch it, one at a time
};

struct AnswerCase {
  std::string name;
  std::vector<std::string> flags;
};

void PrintTo(const AnswerCase& c, std::ostream* os) { *os << c.name; }

class LargeAnswerTest : public ::testing::TestWithParam<AnswerCase> {};

TEST_P(LargeAnswerTest, ConcurrentCallersEachGetExactlyTheirOwnRows) {
  if (auto missing = testing::TestDeviceMissing()) {
    GTEST_SKIP() << *missing;
  }
  auto server = testing::StartDemoServer(kRows, kDim, kSeed, GetParam().flags);
  ASSERT_TRUE(server.ok()) << server.status();
  Reference();  // made before the calls start, not in the first callback

  const auto clients = testing::ClientsOnOwnConnections(**server, kConnections);
  Tally tally;
  std::atomic<int> running{kCallers};
  absl::Notification all_done;
  std::vector<std::unique_ptr<Caller>> callers;
  for (int i = 0; i < kCallers; ++i) {
    callers.push_back(
        std::make_unique<Caller>(clients[i % kConnections].get(), i, &tally, &running, &all_done));
  }
  for (auto& caller : callers) {
    caller->Start();
  }
  // Every call has a 120 s deadline, so this wait is bounded unless the client hangs.
  ASSERT_TRUE(all_done.WaitForNotificationWithTimeout(absl::Minutes(10))) << (*server)->log();

  {
    absl::MutexLock lock(&tally.mu);
    EXPECT_EQ(tally.failed.load(), 0) << tally.first_problem;
    EXPECT_EQ(tally.wrong_rows.load(), 0) << tally.first_problem;
  }
  EXPECT_EQ(tally.ok.load(), kCallers * kCallsEach);
  EXPECT_EQ(tally.large.load(), kCallers * kCallsEach / 2);

  testing::ExpectHealthyThenCleanExit(**server, clients);
}

INSTANTIATE_TEST_SUITE_P(AnswerThreads, LargeAnswerTest,
                         ::testing::Values(AnswerCase{"DefaultAnswerThreads", {}},
                                           // More answer threads than a small machine has cores: a
                                           // batch's calls are finished on several threads at once.
                                           AnswerCase{"FourAnswerThreads", {"--answer_threads=4"}}),
                         [](const ::testing::TestParamInfo<AnswerCase>& info) {
                           return info.param.name;
                         });

}  // namespace
}  // namespace emb::large_answer_test
