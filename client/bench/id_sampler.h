// Row-id samplers for the load generator: uniform, or Zipf-distributed over [0, rows), drawn
// from an explicitly seeded generator so that runs repeat.
//
// Thread-safety: a sampler's Sample() is const and may run concurrently, each thread with its
// own generator.
#ifndef EMB_CLIENT_BENCH_ID_SAMPLER_H_
#define EMB_CLIENT_BENCH_ID_SAMPLER_H_

#include <cstdint>
#include <optional>
#include <random>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace emb::client {

// The generator all samplers take: seeded explicitly so runs repeat.
using BenchRng = std::mt19937_64;

// Uniform ids in [0, num_rows). Requires num_rows >= 1.
class UniformIdSampler {
 public:
  explicit UniformIdSampler(int64_t num_rows) : num_rows_(num_rows) {}
  int64_t Sample(BenchRng& rng) const {
    return std::uniform_int_distribution<int64_t>(0, num_rows_ - 1)(rng);
  }

 private:
  int64_t num_rows_;
};

// Zipf-distributed ids in [0, num_rows): id k - 1 has probability proportional to 1 / k^exponent,
// so id 0 is the most frequent. O(1) per sample and no table, by rejection-inversion (Hormann and
// Derflinger 1996, as in Apache Commons RNG). Requires num_rows >= 1 and exponent > 0.
class ZipfIdSampler {
 public:
  ZipfIdSampler(int64_t num_rows, double exponent);  // NOLINT(bugprone-easily-swappable-parameters)
  int64_t Sample(BenchRng& rng) const;

 private:
  double H(double x) const;
  double HIntegral(double x) const;
  double HIntegralInverse(double x) const;

  int64_t num_rows_;
  double exponent_;
  double h_integral_x1_;
  double h_integral_n_;
  double s_;
};

enum class IdDistribution { kUniform, kZipf };

// "uniform" or "zipf"; INVALID_ARGUMENT otherwise.
absl::StatusOr<IdDistribution> ParseIdDistribution(absl::string_view name);

// Either sampler behind one type.
class IdSampler {
 public:
  // INVALID_ARGUMENT if num_rows < 1, or for kZipf if zipf_exponent <= 0.
  static absl::StatusOr<IdSampler> Create(IdDistribution distribution, int64_t num_rows,
                                          double zipf_exponent);
  int64_t Sample(BenchRng& rng) const {
    return zipf_.has_value() ? zipf_->Sample(rng) : uniform_->Sample(rng);
  }

 private:
  IdSampler() = default;
  std::optional<UniformIdSampler> uniform_;
  std::optional<ZipfIdSampler> zipf_;
};

}  // namespace emb::client

#endif  // EMB_CLIENT_BENCH_ID_SAMPLER_H_
