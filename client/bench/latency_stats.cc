#include "client/bench/latency_stats.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace emb::client {

int64_t PercentileOfSorted(absl::Span<const int64_t> sorted, double p) {
  if (sorted.empty()) {
    return 0;
  }
  const double n = static_cast<double>(sorted.size());
  // Rank ceil(p/100 * n), 1-based; a small tolerance keeps e.g. 99.9% of 1000 at rank 999.
  double rank = std::ceil(p / 100.0 * n - 1e-9);
  rank = std::clamp(rank, 1.0, n);
  return sorted[static_cast<size_t>(rank) - 1];
}

void LatencyRecorder::Merge(const LatencyRecorder& other) {
  nanos_.insert(nanos_.end(), other.nanos_.begin(), other.nanos_.end());
}

LatencySummary LatencyRecorder::Summarize() {
  LatencySummary s;
  s.count = static_cast<int64_t>(nanos_.size());
  if (nanos_.empty()) {
    return s;
  }
  std::sort(nanos_.begin(), nanos_.end());
  long double sum = 0;
  for (int64_t v : nanos_) {
    sum += v;
  }
  s.min = absl::Nanoseconds(nanos_.front());
  s.max = absl::Nanoseconds(nanos_.back());
  s.mean = absl::Nanoseconds(std::llround(static_cast<double>(sum / nanos_.size())));
  s.p50 = absl::Nanoseconds(PercentileOfSorted(nanos_, 50));
  s.p90 = absl::Nanoseconds(PercentileOfSorted(nanos_, 90));
  s.p99 = absl::Nanoseconds(PercentileOfSorted(nanos_, 99));
  s.p999 = absl::Nanoseconds(PercentileOfSorted(nanos_, 99.9));
  return s;
}

}  // namespace emb::client
