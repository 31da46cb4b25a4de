#include "client/bench/latency_stats.h"

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace emb::client::latency_stats_test {
namespace {

std::vector<int64_t> Iota(int64_t first, int64_t last) {
  std::vector<int64_t> v(last - first + 1);
  std::iota(v.begin(), v.end(), first);
  return v;
}

TEST(PercentileOfSorted, NearestRankOnOneToHundred) {
  const std::vector<int64_t> v = Iota(1, 100);
  EXPECT_EQ(PercentileOfSorted(v, 0), 1);
  EXPECT_EQ(PercentileOfSorted(v, 1), 1);
  EXPECT_EQ(PercentileOfSorted(v, 50), 50);
  EXPECT_EQ(PercentileOfSorted(v, 50.5), 51);
  EXPECT_EQ(PercentileOfSorted(v, 90), 90);
  EXPECT_EQ(PercentileOfSorted(v, 99), 99);
  EXPECT_EQ(PercentileOfSorted(v, 99.9), 100);
  EXPECT_EQ(PercentileOfSorted(v, 100), 100);
}

TEST(PercentileOfSorted, ThreeNinesOfThousandIsRank999) {
  EXPECT_EQ(PercentileOfSorted(Iota(1, 1000), 99.9), 999);
  EXPECT_EQ(PercentileOfSorted(Iota(1, 10000), 99.9), 9990);
}

TEST(PercentileOfSorted, EmptyAndSingle) {
  EXPECT_EQ(PercentileOfSorted({}, 50), 0);
  const std::vector<int64_t> one = {7};
  EXPECT_EQ(PercentileOfSorted(one, 0), 7);
  EXPECT_EQ(PercentileOfSorted(one, 99.9), 7);
}

TEST(LatencyRecorder, SummarizesShuffledSamplesExactly) {
  std::vector<int64_t> v = Iota(1, 1000);
  std::shuffle(v.begin(), v.end(), std::mt19937_64(3));
  LatencyRecorder r;
  for (int64_t us : v) {
    r.Record(absl::Microseconds(us));
  }
  const LatencySummary s = r.Summarize();
  EXPECT_EQ(s.count, 1000);
  EXPECT_EQ(s.min, absl::Microseconds(1));
  EXPECT_EQ(s.p50, absl::Microseconds(500));
  EXPECT_EQ(s.p90, absl::Microseconds(900));
  EXPECT_EQ(s.p99, absl::Microseconds(990));
  EXPECT_EQ(s.p999, absl::Microseconds(999));
  EXPECT_EQ(s.max, absl::Microseconds(1000));
  EXPECT_EQ(s.mean, absl::Nanoseconds(500500));
}

TEST(LatencyRecorder, MergeCombinesSamples) {
  LatencyRecorder a;
  LatencyRecorder b;
  for (int64_t i = 1; i <= 50; ++i) {
    a.RecordNanos(2 * i);      // even: 2..100
    b.RecordNanos(2 * i - 1);  // odd: 1..99
  }
  a.Merge(b);
  EXPECT_EQ(a.count(), 100u);
  const LatencySummary s = a.Summarize();
  EXPECT_EQ(s.p50, absl::Nanoseconds(50));
  EXPECT_EQ(s.p99, absl::Nanoseconds(99));
  EXPECT_EQ(s.max, absl::Nanoseconds(100));
}

TEST(LatencyRecorder, EmptySummaryIsZero) {
  LatencyRecorder r;
  const LatencySummary s = r.Summarize();
  EXPECT_EQ(s.count, 0);
  EXPECT_EQ(s.p99, absl::ZeroDuration());
  EXPECT_EQ(s.max, absl::ZeroDuration());
}

}  // namespace
}  // namespace emb::client::latency_stats_test
