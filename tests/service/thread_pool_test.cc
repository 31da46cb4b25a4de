#include "service/batch/thread_pool.h"

#include <atomic>
#include <thread>
#include <vector>

#include "absl/synchronization/blocking_counter.h"
#include "gtest/gtest.h"

namespace emb::service {
namespace {

TEST(ThreadPool, RunsEveryIterationExactlyOnce) {
  for (int threads : {0, 1, 3}) {
    ThreadPool pool(threads);
    for (int n : {0, 1, 2, 17, 1000}) {
      std::vector<std::atomic<int>> seen(n);
      pool.Run(n, [&](int i) { seen[i].fetch_add(1); });
      for (int i = 0; i < n; ++i) {
        ASSERT_EQ(seen[i].load(), 1) << "threads " << threads << " n " << n << " i " << i;
      }
    }
  }
}

TEST(ThreadPool, ConcurrentRunsEachCompleteTheirOwnLoop) {
  ThreadPool pool(2);
  constexpr int kCallers = 4;
  constexpr int kN = 500;
  std::vector<std::vector<std::atomic<int>>> seen(kCallers);
  for (auto& s : seen) {
    s = std::vector<std::atomic<int>>(kN);
  }
  std::vector<std::thread> callers;
  for (int c = 0; c < kCallers; ++c) {
    callers.emplace_back([&, c] {
      for (int round = 0; round < 20; ++round) {
        pool.Run(kN, [&](int i) { seen[c][i].fetch_add(1); });
      }
    });
  }
  for (auto& t : callers) {
    t.join();
  }
  for (int c = 0; c < kCallers; ++c) {
    for (int i = 0; i < kN; ++i) {
      ASSERT_EQ(seen[c][i].load(), 20) << "caller " << c << " i " << i;
    }
  }
}

TEST(ThreadPool, EveryPostedTaskRunsOnceBeforeThePoolIsGone) {
  for (int threads : {0, 1, 4}) {
    constexpr int kTasks = 2000;
    std::vector<std::atomic<int>> ran(kTasks);
    {
      ThreadPool pool(threads);
      for (int i = 0; i < kTasks; ++i) {
        pool.Post([&ran, i] { ran[i].fetch_add(1); });
      }
    }  // the destructor runs what is still queued
    for (int i = 0; i < kTasks; ++i) {
      ASSERT_EQ(ran[i].load(), 1) << "threads " << threads << " task " << i;
    }
  }
}

// Loops started from inside tasks, with every worker busy running such a task, still finish:
// their callers claim the iterations no worker is free to take.
TEST(ThreadPool, LoopsInsideTasksOfABusyPoolFinish) {
  constexpr int kThreads = 3;
  constexpr int kTasks = 12;
  constexpr int kN = 200;
  std::atomic<int> total{0};
  absl::BlockingCounter done(kTasks);
  ThreadPool pool(kThreads);
  for (int t = 0; t < kTasks; ++t) {
    pool.Post([&] {
      pool.Run(kN, [&](int) { total.fetch_add(1); });
      done.DecrementCount();
    });
  }
  done.Wait();
  EXPECT_EQ(total.load(), kTasks * kN);
}

}  // namespace
}  // namespace emb::service
