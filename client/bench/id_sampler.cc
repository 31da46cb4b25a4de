#include "client/bench/id_sampler.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace emb::client {
namespace {

// log1p(x) / x, accurate near 0.
double Helper1(double x) {
  if (std::abs(x) > 1e-8) {
    return std::log1p(x) / x;
  }
  return 1 - x * (0.5 - x * (1.0 / 3.0 - 0.25 * x));
}

// expm1(x) / x, accurate near 0.
double Helper2(double x) {
  if (std::abs(x) > 1e-8) {
    return std::expm1(x) / x;
  }
  return 1 + x * 0.5 * (1 + x * (1.0 / 3.0) * (1 + 0.25 * x));
}

}  // namespace

ZipfIdSampler::ZipfIdSampler(int64_t num_rows,  // NOLINT(bugprone-easily-swappable-parameters)
                             double exponent)
    : num_rows_(num_rows), exponent_(exponent) {
  h_integral_x1_ = HIntegral(1.5) - 1;
  h_integral_n_ = HIntegral(static_cast<double>(num_rows_) + 0.5);
  s_ = 2 - HIntegralInverse(HIntegral(2.5) - H(2));
}

// h(x) = 1 / x^exponent, the unnormalized density.
double ZipfIdSampler::H(double x) const { return std::exp(-exponent_ * std::log(x)); }

// An antiderivative of h: (x^(1-e) - 1) / (1-e), or log(x) at e = 1.
double ZipfIdSampler::HIntegral(double x) const {
  const double log_x = std::log(x);
  return Helper2((1 - exponent_) * log_x) * log_x;
}

double ZipfIdSampler::HIntegralInverse(double x) const {
  double t = x * (1 - exponent_);
  if (t < -1) {
    t = -1;  // rounding can push it just below the domain
  }
  return std::exp(Helper1(t) * x);
}

int64_t ZipfIdSampler::Sample(BenchRng& rng) const {
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  while (true) {
    // u is uniform in (h_integral_x1_, h_integral_n_].
    const double u = h_integral_n_ + unit(rng) * (h_integral_x1_ - h_integral_n_);
    const double x = HIntegralInverse(u);
    int64_t k = std::llround(x);
    k = std::clamp<int64_t>(k, 1, num_rows_);
    const double kd = static_cast<double>(k);
    if (kd - x <= s_ || u >= HIntegral(kd + 0.5) - H(kd)) {
      return k - 1;
    }
  }
}

absl::StatusOr<IdDistribution> ParseIdDistribution(absl::string_view name) {
  if (name == "uniform") {
    return IdDistribution::kUniform;
  }
  if (name == "zipf") {
    return IdDistribution::kZipf;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("id distribution must be uniform or zipf, got \"", name, "\""));
}

absl::StatusOr<IdSampler> IdSampler::Create(IdDistribution distribution, int64_t num_rows,
                                            double zipf_exponent) {
  if (num_rows < 1) {
    return absl::InvalidArgumentError(absl::StrCat("cannot sample ids from ", num_rows, " rows"));
  }
  IdSampler sampler;
  if (distribution == IdDistribution::kZipf) {
    if (!(zipf_exponent > 0) || std::isinf(zipf_exponent)) {
      return absl::InvalidArgumentError(
          absl::StrCat("zipf exponent must be positive and finite, got ", zipf_exponent));
    }
    sampler.zipf_.emplace(num_rows, zipf_exponent);
  } else {
    sampler.uniform_.emplace(num_rows);
  }
  return sampler;
}

}  // namespace emb::client
