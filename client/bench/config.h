// What one load-generator run does: target, load shape (closed or open loop), length, requests.
// A plain struct; ValidateBenchConfig checks it before anything connects.
#ifndef EMB_CLIENT_BENCH_CONFIG_H_
#define EMB_CLIENT_BENCH_CONFIG_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "client/bench/id_sampler.h"
#include "client/embedding_client.h"
#include "kernels/data_type.h"

namespace emb::client {

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
  // Requests made before the run (ids drawn from `distribution`) and sent in turn; 0: as many as
  // RequestPoolSize(ids_per_request) says. More than a run sends makes every call's ids fresh,
  // as a cache under test must not learn a replayed pool (the host tier's service benchmark).
  int64_t pool_requests = 0;
  // Deadline of each call, and of the setup calls.
  absl::Duration timeout = absl::Seconds(10);
  // Largest answer the client accepts, in bytes; -1: no limit. A larger answer fails the call
  // with RESOURCE_EXHAUSTED, counted like any other status.
  int64_t max_recv_message_bytes = -1;
  // Non-empty: ghz call data, JSON LookUpRequests whose strings may hold ghz templates
  // ("{{randomInt 0 100000}}", call_data.h), used in turn. Each request of the run is one of them
  // with its templates filled, so they replace ids_per_request, distribution and zipf_exponent;
  // a non-empty `table` and a set `dtype` override the data's own.
  std::vector<std::string> call_data;
};

// INVALID_ARGUMENT, naming the field, if `config` can't run: counts below 1, a negative or
// infinite rate, no length (neither requests nor a positive finite duration), a non-positive
// timeout, or more blocking slots than kMaxBlockingSlots.
absl::Status ValidateBenchConfig(const BenchConfig& config);

}  // namespace emb::client

#endif  // EMB_CLIENT_BENCH_CONFIG_H_
