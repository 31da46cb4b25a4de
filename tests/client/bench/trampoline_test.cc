#include "client/bench/trampoline.h"

#include <algorithm>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace emb::client::internal::trampoline_test {
namespace {

using ::testing::ElementsAre;

TEST(RunTrampolined, RunsAtOnceWhenNotNested) {
  int runs = 0;
  RunTrampolined([&] { ++runs; });
  EXPECT_EQ(runs, 1);
}

TEST(RunTrampolined, NestedStartRunsAfterTheOuterReturns) {
  std::vector<std::string> order;
  RunTrampolined([&] {
    order.push_back("outer begins");
    RunTrampolined([&] { order.push_back("inner"); });
    order.push_back("outer ends");
  });
  EXPECT_THAT(order, ElementsAre("outer begins", "outer ends", "inner"));
}

// A chain of a million starts, each from the last (as a callback that fails inline would make),
// runs on a flat stack: without the trampoline this recursion would overflow it.
TEST(RunTrampolined, LongChainKeepsTheStackFlat) {
  int remaining = 1000000;
  int max_depth = 0;
  int depth = 0;
  struct Chain {
    int* remaining;
    int* depth;
    int* max_depth;
    void operator()() const {
      ++*depth;
      *max_depth = std::max(*max_depth, *depth);
      if (--*remaining > 0) {
        RunTrampolined(*this);
      }
      --*depth;
    }
  };
  RunTrampolined(Chain{&remaining, &depth, &max_depth});
  EXPECT_EQ(remaining, 0);
  EXPECT_EQ(max_depth, 1);
}

}  // namespace
}  // namespace emb::client::internal::trampoline_test
