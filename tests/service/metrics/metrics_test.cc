#include "service/metrics/metrics.h"

#include <algorithm>

#include "gtest/gtest.h"

namespace emb::service {
namespace {

TEST(Metrics, StageBucketsResolveMicrosecondsAndKeepEveryCoarseBound) {
  const auto& stage = Metrics::StageSecondsBuckets();
  EXPECT_EQ(stage.front(), 1e-6);
  EXPECT_EQ(stage.back(), 10);
  EXPECT_TRUE(std::is_sorted(stage.begin(), stage.end()));
  EXPECT_EQ(std::adjacent_find(stage.begin(), stage.end()), stage.end());
  // A rule or panel written for the coarse buckets finds its `le` in the fine ones.
  for (double bound : Metrics::SecondsBuckets()) {
    EXPECT_NE(std::find(stage.begin(), stage.end(), bound), stage.end()) << bound;
  }
  // From 4 to 15 us (the H200's small gathers), no step wider than 25%.
  for (size_t i = 1; i < stage.size() && stage[i] <= 1.5e-5; ++i) {
    if (stage[i - 1] >= 4e-6) {
      EXPECT_LE(stage[i] / stage[i - 1], 1.25 + 1e-9) << stage[i];
    }
  }
}

}  // namespace
}  // namespace emb::service
