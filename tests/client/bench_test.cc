#include "client/bench.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace emb::client {
namespace {

using ::testing::HasSubstr;

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

TEST(UniformIdSampler, StaysInRangeAndCoversIt) {
  constexpr int64_t kRows = 10;
  constexpr int kSamples = 100000;
  UniformIdSampler sampler(kRows);
  BenchRng rng(1);
  std::vector<int> counts(kRows, 0);
  for (int i = 0; i < kSamples; ++i) {
    const int64_t id = sampler.Sample(rng);
    ASSERT_GE(id, 0);
    ASSERT_LT(id, kRows);
    ++counts[id];
  }
  for (int c : counts) {
    EXPECT_NEAR(static_cast<double>(c) / kSamples, 0.1, 0.01);
  }
}

TEST(UniformIdSampler, SingleRowIsAlwaysZero) {
  UniformIdSampler sampler(1);
  BenchRng rng(1);
  for (int i = 0; i < 100; ++i) {
    EXPECT_EQ(sampler.Sample(rng), 0);
  }
}

TEST(ZipfIdSampler, StaysInRange) {
  for (int64_t rows : {int64_t{1}, int64_t{2}, int64_t{7}, int64_t{1000}, int64_t{1} << 40}) {
    for (double exponent : {0.5, 1.0, 1.2, 3.0}) {
      ZipfIdSampler sampler(rows, exponent);
      BenchRng rng(42);
      for (int i = 0; i < 20000; ++i) {
        const int64_t id = sampler.Sample(rng);
        ASSERT_GE(id, 0) << rows << " " << exponent;
        ASSERT_LT(id, rows) << rows << " " << exponent;
      }
    }
  }
}

// The empirical frequencies match the normalized 1/k^s law.
void ExpectZipfLaw(int64_t rows, double exponent) {
  constexpr int kSamples = 400000;
  ZipfIdSampler sampler(rows, exponent);
  BenchRng rng(7);
  std::vector<int> counts(rows, 0);
  for (int i = 0; i < kSamples; ++i) {
    ++counts[sampler.Sample(rng)];
  }
  double norm = 0;
  for (int64_t k = 1; k <= rows; ++k) {
    norm += std::pow(static_cast<double>(k), -exponent);
  }
  for (int64_t k = 1; k <= rows; ++k) {
    const double expected = std::pow(static_cast<double>(k), -exponent) / norm;
    EXPECT_NEAR(static_cast<double>(counts[k - 1]) / kSamples, expected, 0.004)
        << "id " << k - 1 << " rows " << rows << " exponent " << exponent;
  }
}

TEST(ZipfIdSampler, FollowsZipfLawAtExponentOne) { ExpectZipfLaw(100, 1.0); }
TEST(ZipfIdSampler, FollowsZipfLawBelowOne) { ExpectZipfLaw(50, 0.7); }
TEST(ZipfIdSampler, FollowsZipfLawAboveOne) { ExpectZipfLaw(10, 1.5); }

TEST(ZipfIdSampler, IsSkewedTowardLowIds) {
  constexpr int64_t kRows = 1000000;
  constexpr int kSamples = 200000;
  ZipfIdSampler sampler(kRows, 1.0);
  BenchRng rng(11);
  int id0 = 0;
  int below_100 = 0;
  for (int i = 0; i < kSamples; ++i) {
    const int64_t id = sampler.Sample(rng);
    id0 += id == 0;
    below_100 += id < 100;
  }
  // H(10^6) = 14.39: P(0) = 0.0695; P(id < 100) = H(100) / H(10^6) = 0.360.
  EXPECT_NEAR(static_cast<double>(id0) / kSamples, 0.0695, 0.004);
  EXPECT_NEAR(static_cast<double>(below_100) / kSamples, 0.360, 0.01);
}

TEST(IdSampler, SameSeedSameIds) {
  for (IdDistribution d : {IdDistribution::kUniform, IdDistribution::kZipf}) {
    absl::StatusOr<IdSampler> sampler = IdSampler::Create(d, 12345, 1.1);
    ASSERT_TRUE(sampler.ok()) << sampler.status();
    BenchRng a(5);
    BenchRng b(5);
    for (int i = 0; i < 1000; ++i) {
      ASSERT_EQ(sampler->Sample(a), sampler->Sample(b));
    }
  }
}

TEST(IdSampler, RejectsNoRows) {
  EXPECT_EQ(IdSampler::Create(IdDistribution::kUniform, 0, 1.0).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(IdSampler::Create(IdDistribution::kZipf, 0, 1.0).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(IdSampler, RejectsNonPositiveZipfExponent) {
  EXPECT_EQ(IdSampler::Create(IdDistribution::kZipf, 10, 0.0).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(IdSampler::Create(IdDistribution::kZipf, 10, -1.0).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(IdSampler::Create(IdDistribution::kUniform, 10, 0.0).ok());
}

TEST(ParseIdDistribution, KnowsBothNames) {
  EXPECT_EQ(*ParseIdDistribution("uniform"), IdDistribution::kUniform);
  EXPECT_EQ(*ParseIdDistribution("zipf"), IdDistribution::kZipf);
  EXPECT_EQ(ParseIdDistribution("normal").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(FormatBenchJson, HasEveryKey) {
  BenchReport r;
  r.table = "t\"1";
  r.rows = 10;
  r.dim = 4;
  r.requests = 200;
  r.duration_s = 2;
  r.ok_ids = 3200;
  r.payload_bytes = 4000000;
  r.latency.p50 = absl::Microseconds(100);
  r.latency.p999 = absl::Microseconds(1500);
  r.codes["OK"] = 199;
  r.codes["UNAVAILABLE"] = 1;
  const std::string json = FormatBenchJson(r);
  EXPECT_THAT(json, HasSubstr("\"requests\":200,"));
  EXPECT_THAT(json, HasSubstr("\"duration_s\":2.000000,"));
  EXPECT_THAT(json, HasSubstr("\"rps\":100.000,"));
  EXPECT_THAT(json, HasSubstr("\"ids_per_s\":1600.000,"));
  EXPECT_THAT(json, HasSubstr("\"payload_mb_per_s\":2.000000,"));
  EXPECT_THAT(json, HasSubstr("\"latency_us\":{\"p50\":100.000,"));
  EXPECT_THAT(json, HasSubstr("\"p999\":1500.000,"));
  EXPECT_THAT(json, HasSubstr("\"codes\":{\"OK\":199,\"UNAVAILABLE\":1}"));
  EXPECT_THAT(json, HasSubstr("\"table\":\"t\\\"1\""));
  EXPECT_EQ(json.front(), '{');
  EXPECT_EQ(json.back(), '}');
}

TEST(RunBench, RejectsMoreBlockingSlotsThanThreadsItWouldStart) {
  BenchConfig config;
  config.target = "127.0.0.1:1";  // never reached: the config is checked first
  config.blocking = true;
  config.concurrency = kMaxBlockingSlots + 1;
  const absl::Status s = RunBench(config).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), ::testing::HasSubstr("limit of 1024"));
}

TEST(RunBench, RejectsBadConfigBeforeConnecting) {
  BenchConfig config;
  config.target = "127.0.0.1:1";
  config.concurrency = 0;
  EXPECT_EQ(RunBench(config).status().code(), absl::StatusCode::kInvalidArgument);
  config.concurrency = 1;
  config.ids_per_request = 0;
  EXPECT_EQ(RunBench(config).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace emb::client
