// The three ways the load generator issues LookUps, and what each measured call adds up to.
//
// Closed loop: `concurrency` slots, each starting its next call when its last completes, on
// gRPC's callback threads (RunClosedLoop) or on a thread of its own making blocking calls
// (RunClosedLoopBlocking). Open loop (RunOpenLoop): call i is due at start + i / rps and is sent
// then, or as soon as one of `max_inflight` slots is free; its latency runs from the due time,
// so a slow server is not hidden by the client waiting for it (no coordinated omission).
//
// Internal to emb::client (RunBench, client/bench.h, is the entry point). Each loop returns once
// every call it started has completed.
#ifndef EMB_CLIENT_BENCH_RUN_LOOPS_H_
#define EMB_CLIENT_BENCH_RUN_LOOPS_H_

#include <grpcpp/client_context.h>
#include <grpcpp/support/status.h>

#include <atomic>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "client/bench/config.h"
#include "client/bench/latency_stats.h"
#include "embedding/v1/embedding_service.grpc.pb.h"

namespace emb::client::internal {

// Monotonic nanoseconds.
int64_t NowNanos();

// What the measured calls of one slot or shard add up to. Not thread-safe.
struct CallStats {
  LatencyRecorder latencies;
  LatencyRecorder ok_latencies;
  std::map<int, int64_t> codes;  // by grpc::StatusCode
  // The message of the first call of each code other than OK (as ghz reports them).
  std::map<int, std::string> first_messages;
  int64_t ok_ids = 0;
  int64_t payload_bytes = 0;
  int64_t last_done_ns = std::numeric_limits<int64_t>::min();

  // `latency` runs from the call's due time (open loop) or start; `sent_latency`, from when it
  // was sent: the two differ when an open-loop generator falls behind its rate.
  void Add(absl::Duration latency, absl::Duration sent_latency, int64_t done_ns,
           const grpc::Status& status, const embedding::v1::LookUpResponse& response,
           int64_t num_ids);
  void Merge(const CallStats& other);
};

// Everything one run shares; must outlive the loop that uses it.
struct RunState {
  const BenchConfig* config = nullptr;
  std::vector<std::unique_ptr<embedding::v1::EmbeddingService::Stub>> stubs;
  // The requests, reused round-robin.
  std::vector<embedding::v1::LookUpRequest> pool;
  int64_t measure_start_ns = 0;
  int64_t stop_ns = 0;  // calls start before this; INT64_MAX in --requests mode
  std::atomic<int64_t> next_seq{0};
  int64_t unsent = 0;  // open loop: calls due but not sent by stop_ns (the generator was behind)
  std::atomic<int64_t> measured_issued{0};

  const embedding::v1::LookUpRequest& RequestFor(int64_t seq) const {
    return pool[seq % pool.size()];
  }

  // A closed-loop slot about to start a call at `now`: false when the run is over for it (past
  // the stop time, or the measured calls are all issued); else whether the call is measured.
  // Thread-safe.
  bool MayStart(int64_t now, bool* measured);

  void SetDeadline(grpc::ClientContext* ctx) const {
    ctx->set_deadline(absl::ToChronoTime(absl::Now() + config->timeout));
  }
};

CallStats RunClosedLoop(RunState* run);
CallStats RunClosedLoopBlocking(RunState* run);
// `start_ns`: the due time of call 0.
CallStats RunOpenLoop(RunState* run, int64_t start_ns);

}  // namespace emb::client::internal

#endif  // EMB_CLIENT_BENCH_RUN_LOOPS_H_
