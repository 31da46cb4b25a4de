// The load generator behind `embedding-client bench`: RunBench drives EmbeddingService.LookUp
// as BenchConfig describes and returns a BenchReport. This header is the entry point; the pieces
// live in client/bench/:
//   config.h          BenchConfig and its validation
//   latency_stats.h   exact percentiles (LatencyRecorder)
//   id_sampler.h      uniform and Zipf row ids
//   call_data.h       ghz call data and its templates
//   ghz_config.h      ghz config files (bench --config)
//   request_pool.h    the requests a run cycles through
//   run_loops.h       closed loop (callbacks or blocking) and open loop (no coordinated omission)
//   report.h          BenchReport, as JSON or text
//
// Thread-safety: RunBench may be called from any thread.
#ifndef EMB_CLIENT_BENCH_H_
#define EMB_CLIENT_BENCH_H_

#include "absl/status/statusor.h"
#include "client/bench/config.h"
#include "client/bench/id_sampler.h"
#include "client/bench/latency_stats.h"
#include "client/bench/report.h"

namespace emb::client {

// Runs the benchmark that `config` describes. Errors: INVALID_ARGUMENT for a bad config (or bad
// call data), UNAVAILABLE if a connection can't be made within `timeout`, the ListTables error,
// NOT_FOUND for an unknown table. Errors of the measured calls are counted in the report, not
// returned.
absl::StatusOr<BenchReport> RunBench(const BenchConfig& config);

}  // namespace emb::client

#endif  // EMB_CLIENT_BENCH_H_
