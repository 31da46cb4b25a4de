// Exact latency statistics for the load generator: every sample is kept, so percentiles are
// exact (nearest rank), not estimated from buckets.
//
// Thread-safety: LatencyRecorder is not thread-safe; use one per thread and Merge them.
#ifndef EMB_CLIENT_BENCH_LATENCY_STATS_H_
#define EMB_CLIENT_BENCH_LATENCY_STATS_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/time/time.h"
#include "absl/types/span.h"

namespace emb::client {

// Nearest-rank percentile of ascending `sorted`: the smallest sample such that at least p% of
// the samples are <= it. p in [0, 100]; p = 0 gives the minimum. 0 if `sorted` is empty.
int64_t PercentileOfSorted(absl::Span<const int64_t> sorted, double p);

struct LatencySummary {
  int64_t count = 0;
  absl::Duration min;
  absl::Duration mean;
  absl::Duration p50;
  absl::Duration p90;
  absl::Duration p99;
  absl::Duration p999;
  absl::Duration max;
};

// Collects latencies with nanosecond resolution. Not thread-safe.
class LatencyRecorder {
 public:
  void Record(absl::Duration latency) { RecordNanos(absl::ToInt64Nanoseconds(latency)); }
  void RecordNanos(int64_t nanos) { nanos_.push_back(nanos); }
  // Appends every sample of `other`.
  void Merge(const LatencyRecorder& other);
  size_t count() const { return nanos_.size(); }
  // Exact statistics of all samples so far (PercentileOfSorted); sorts the samples in place.
  LatencySummary Summarize();

 private:
  std::vector<int64_t> nanos_;
};

}  // namespace emb::client

#endif  // EMB_CLIENT_BENCH_LATENCY_STATS_H_
