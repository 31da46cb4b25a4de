// The load generator behind `embedding-client bench`, and its statistics.
//
// LatencyRecorder keeps every sample, so percentiles are exact. The id samplers draw row ids
// uniformly or Zipf-distributed over [0, rows). RunBench drives EmbeddingService.LookUp through
// the callback API, either closed loop (a fixed number of calls in flight) or open loop (calls
// started on a fixed schedule, latency measured from the scheduled start, so a slow server is
// not hidden by the client waiting for it: no coordinated omission).
//
// Thread-safety: LatencyRecorder and the samplers are not thread-safe (use one per thread and
// Merge); the samplers' Sample() is const and may run concurrently with its own generator per
// thread. RunBench may be called from any thread.
#ifndef EMB_CLIENT_BENCH_H_
#define EMB_CLIENT_BENCH_H_

#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "client/embedding_client.h"
#include "kernels/data_type.h"

namespace emb::client {

// The generator all samplers take: seeded explicitly so runs repeat.
using BenchRng = std::mt19937_64;

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

// Slots of a blocking closed loop, at most (each is a thread).
inline constexpr int kMaxBlockingSlots = 1024;

struct BenchConfig {
  std::string target = "localhost:50051";
  // nullopt: plaintext; else every channel speaks TLS with these settings.
  std::optional<TlsOptions> tls;
  // Channels, each its own TCP connection; calls spread over them round-robin.
  int connections = 1;
  // Closed loop: calls kept in flight.
  int concurrency = 1;
  // Closed loop only: one thread per slot, each making blocking calls and so polling for its own
  // answer, instead of callbacks on gRPC's threads. Fewer thread hand-offs per call: the lower
  // latency at low concurrency; callbacks scale better to thousands of slots.
  bool blocking = false;  // at most kMaxBlockingSlots slots
  // > 0: open loop at this many calls per second, at most `max_inflight` in flight; a call that
  // waits for a free slot counts the wait in its latency.
  double rps = 0;
  int max_inflight = 4096;
  // The measured phase ends after `requests` calls if > 0, else after `duration`.
  absl::Duration duration = absl::Seconds(10);
  int64_t requests = 0;
  // Run first at the same load, not recorded.
  absl::Duration warmup = absl::Seconds(1);
  int64_t ids_per_request = 16;
  IdDistribution distribution = IdDistribution::kUniform;
  double zipf_exponent = 1.0;
  std::string table;              // empty: the default table
  std::optional<DataType> dtype;  // nullopt: the table's own type
  uint64_t seed = 1;
  // Deadline of each call, and of the setup calls.
  absl::Duration timeout = absl::Seconds(10);
};

struct BenchReport {
  // The table the run used, from ListTables.
  std::string table;
  int64_t rows = 0;
  int64_t dim = 0;
  // Calls started in the measured phase, whatever their status.
  int64_t requests = 0;
  // From the start of the measured phase to the last of its calls' completions.
  double duration_s = 0;
  // Ids and answer bytes of the calls that returned OK.
  int64_t ok_ids = 0;
  int64_t payload_bytes = 0;
  // Over every measured call.
  LatencySummary latency;
  // Over the measured calls that returned OK, each from when it was sent (under overload the
  // refused calls are fast, and an open-loop generator may fall behind its rate).
  LatencySummary ok_latency;
  // Open loop: calls that fell due but were not sent by the end, the generator being behind.
  int64_t unsent = 0;
  // Calls per final status, keyed by the google.rpc.Code name ("OK", "UNAVAILABLE", ...).
  std::map<std::string, int64_t> codes;

  double rps() const { return PerSecond(requests); }
  double ids_per_s() const { return PerSecond(ok_ids); }
  // Megabytes of 10^6 bytes.
  double payload_mb_per_s() const { return PerSecond(payload_bytes) / 1e6; }
  double PerSecond(int64_t n) const {
    return duration_s > 0 ? static_cast<double>(n) / duration_s : 0;
  }
};

// Runs the benchmark that `config` describes. Errors: INVALID_ARGUMENT for a bad config,
// UNAVAILABLE if a connection can't be made within `timeout`, the ListTables error, NOT_FOUND
// for an unknown table. Errors of the measured calls are counted in the report, not returned.
absl::StatusOr<BenchReport> RunBench(const BenchConfig& config);

// One JSON object on one line: requests, duration_s, rps, ids_per_s, payload_mb_per_s,
// latency_us {p50, p90, p99, p999, max, mean}, codes {"OK": n, ...}, and table, rows, dim.
std::string FormatBenchJson(const BenchReport& report);
// A few lines for people.
std::string FormatBenchText(const BenchConfig& config, const BenchReport& report);

}  // namespace emb::client

#endif  // EMB_CLIENT_BENCH_H_
