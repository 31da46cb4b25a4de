#include "client/bench/id_sampler.h"

#include <cmath>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"

namespace emb::client::id_sampler_test {
namespace {

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

}  // namespace
}  // namespace emb::client::id_sampler_test
