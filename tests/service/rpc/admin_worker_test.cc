#include "service/rpc/admin_worker.h"

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <optional>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/blocking_counter.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace emb::service::admin_worker_test {
namespace {

using ::testing::HasSubstr;
using testing::StatusIs;

// What the jobs of a test saw, in the order they were called.
class Record {
 public:
  void Add(int job, const absl::Status& start, std::thread::id thread) {
    absl::MutexLock lock(&mu_);
    calls_.push_back(Call{job, start, thread});
  }
  struct Call {
    int job;
    absl::Status start;
    std::thread::id thread;
  };
  std::vector<Call> calls() {
    absl::MutexLock lock(&mu_);
    return calls_;
  }
  // Waits until `n` calls are recorded.
  void WaitFor(size_t n) {
    auto enough = [this, n]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return calls_.size() >= n; };
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(&enough));
  }

 private:
  absl::Mutex mu_;
  std::vector<Call> calls_ ABSL_GUARDED_BY(mu_);
};

TEST(AdminWorker, RunsJobsOneAtATimeInTheOrderPostedOnOneThread) {
  constexpr int kJobs = 200;
  Record record;
  absl::BlockingCounter done(kJobs);
  AdminWorker worker(kJobs, "jobs", "the test's queue");
  absl::Mutex mu;
  int running = 0;
  int most_running = 0;
  for (int i = 0; i < kJobs; ++i) {
    ASSERT_TRUE(worker
                    .Post([&, i](const absl::Status& start) {
                      {
                        absl::MutexLock lock(&mu);
                        most_running = std::max(most_running, ++running);
                      }
                      record.Add(i, start, std::this_thread::get_id());
                      {
                        absl::MutexLock lock(&mu);
                        --running;
                      }
                      done.DecrementCount();
                    })
                    .ok());
  }
  done.Wait();
  const std::vector<Record::Call> calls = record.calls();
  ASSERT_EQ(calls.size(), static_cast<size_t>(kJobs));
  for (int i = 0; i < kJobs; ++i) {
    EXPECT_EQ(calls[i].job, i);
    EXPECT_TRUE(calls[i].start.ok()) << calls[i].start;
    EXPECT_EQ(calls[i].thread, calls[0].thread);
  }
  EXPECT_NE(calls[0].thread, std::this_thread::get_id());
  EXPECT_EQ(most_running, 1);
}

// While a job runs, `max_queued` more may wait; the next is refused naming the limit, and is
// taken again once one has started.
TEST(AdminWorker, RefusesAJobBeyondTheQueueNamingTheLimit) {
  AdminWorker worker(3, "saves and version loads", "the admin service's queue");
  absl::Notification started, release;
  ASSERT_TRUE(worker
                  .Post([&](const absl::Status&) {
                    started.Notify();
                    release.WaitForNotification();
                  })
                  .ok());
  started.WaitForNotification();  // the first job runs: it no longer counts as waiting
  absl::BlockingCounter waited(3);
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(worker.Post([&](const absl::Status&) { waited.DecrementCount(); }).ok()) << i;
  }
  bool refused_called = false;
  EXPECT_THAT(worker.Post([&](const absl::Status&) { refused_called = true; }),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr("3 saves and version loads wait already, the limit of the admin "
                                 "service's queue (3, behind the one running)")));
  release.Notify();
  waited.Wait();
  absl::Notification again;
  ASSERT_TRUE(worker.Post([&](const absl::Status&) { again.Notify(); }).ok());
  again.WaitForNotification();
  worker.Shutdown();
  EXPECT_FALSE(refused_called);
}

// Shutdown answers the waiting jobs UNAVAILABLE without running them, lets the running one
// finish, and refuses later jobs.
TEST(AdminWorker, ShutdownCancelsWaitingJobsAndWaitsForTheRunningOne) {
  Record record;
  AdminWorker worker(8, "update messages of table 't'", "the table's writer");
  absl::Notification started, release;
  std::optional<absl::Status> running_start;
  std::atomic<bool> running_returned{false};
  ASSERT_TRUE(worker
                  .Post([&](const absl::Status& start) {
                    running_start = start;
                    started.Notify();
                    release.WaitForNotification();
                    running_returned = true;
                  })
                  .ok());
  started.WaitForNotification();
  for (int i = 1; i <= 4; ++i) {
    ASSERT_TRUE(worker
                    .Post([&, i](const absl::Status& start) {
                      record.Add(i, start, std::this_thread::get_id());
                    })
                    .ok());
  }
  std::thread::id stopper_thread;
  std::thread stopper([&] {
    stopper_thread = std::this_thread::get_id();
    worker.Shutdown();
  });
  record.WaitFor(4);  // the waiting jobs are answered while the running one still runs
  EXPECT_FALSE(running_returned);
  release.Notify();
  stopper.join();
  EXPECT_TRUE(running_returned);
  ASSERT_TRUE(running_start.has_value());
  EXPECT_TRUE(running_start->ok()) << *running_start;
  const std::vector<Record::Call> calls = record.calls();
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(calls[i].job, i + 1);
    EXPECT_THAT(calls[i].start,
                StatusIs(absl::StatusCode::kUnavailable,
                         HasSubstr("waited behind other update messages of table 't' and was not "
                                   "started")));
    EXPECT_EQ(calls[i].thread, stopper_thread);
  }
  EXPECT_THAT(worker.Post([](const absl::Status&) {}),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("shutting down")));
  worker.Shutdown();  // again: nothing to do
}

}  // namespace
}  // namespace emb::service::admin_worker_test
