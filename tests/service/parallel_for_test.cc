#include "service/batch/parallel_for.h"

#include <atomic>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace emb::service {
namespace {

TEST(ParallelFor, RunsEveryIterationExactlyOnce) {
  for (int threads : {0, 1, 3}) {
    ParallelFor pool(threads);
    for (int n : {0, 1, 2, 17, 1000}) {
      std::vector<std::atomic<int>> seen(n);
      pool.Run(n, [&](int i) { seen[i].fetch_add(1); });
      for (int i = 0; i < n; ++i) {
        ASSERT_EQ(seen[i].load(), 1) << "threads " << threads << " n " << n << " i " << i;
      }
    }
  }
}

TEST(ParallelFor, ConcurrentRunsEachCompleteTheirOwnLoop) {
  ParallelFor pool(2);
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

}  // namespace
}  // namespace emb::service
