#include "service/batch/thread_pool.h"

#include <atomic>
#include <thread>
#include <vector>

#include "absl/synchronization/blocking_counter.h"
#include "gtest/gtest.h"

namespace emb::service::thread_pool_test {
namespace {

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

TEST(ThreadPool, WithoutWorkersATaskRunsOnThePostingThread) {
  ThreadPool pool(0);
  std::thread::id ran_on;
  pool.Post([&ran_on] { ran_on = std::this_thread::get_id(); });
  EXPECT_EQ(ran_on, std::this_thread::get_id());
}

// Tasks posted from several threads at once while the workers run them: each runs exactly once.
TEST(ThreadPool, TasksPostedFromManyThreadsEachRunOnce) {
  constexpr int kPosters = 4;
  constexpr int kTasks = 500;
  std::vector<std::atomic<int>> ran(kPosters * kTasks);
  absl::BlockingCounter done(kPosters * kTasks);
  ThreadPool pool(3);
  std::vector<std::thread> posters;
  for (int p = 0; p < kPosters; ++p) {
    posters.emplace_back([&, p] {
      for (int i = 0; i < kTasks; ++i) {
        pool.Post([&ran, &done, k = p * kTasks + i] {
          ran[k].fetch_add(1);
          done.DecrementCount();
        });
      }
    });
  }
  for (auto& t : posters) {
    t.join();
  }
  done.Wait();
  for (int k = 0; k < kPosters * kTasks; ++k) {
    ASSERT_EQ(ran[k].load(), 1) << "task " << k;
  }
}

}  // namespace
}  // namespace emb::service::thread_pool_test
