// How a store is set up: the options every backend takes, and where its tables live.
#ifndef EMB_SERVICE_STORE_STORE_OPTIONS_H_
#define EMB_SERVICE_STORE_STORE_OPTIONS_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "service/common/clock.h"

namespace emb::service {

struct StoreOptions {
  // The most ids of one batch (the batcher's --max_batch_ids): buffers are sized for it.
  int64_t max_batch_ids = 65536;
  // GPU: batches in flight per table, each with its own stream and buffers.
  int inflight_batches = 4;
  // GPU: how long a completion thread that has just answered a batch keeps polling for the next
  // one before it sleeps (one thread polls at a time); 0: never. Polling spares a thread wake-up
  // per batch (about 30 us off the p50 of one call at a time on the H200 host) for a busy core.
  absl::Duration completion_poll = absl::Microseconds(500);
  // GPU: completion threads poll only while batches start this far apart or more (a moving mean).
  // Under a steady stream of batches a wake-up is off the critical path, and a spinning core
  // competes with gRPC's threads: on the H200 host, polling at 16 concurrent calls of 16 x 128
  // (batches about 40 us apart) doubled the p99.
  absl::Duration completion_poll_min_gap = absl::Microseconds(100);
  // GPU: batches whose answer is at most this many bytes are gathered straight from and into
  // mapped pinned memory (one launch, no copies); larger ones copy ids in and rows out with the
  // copy engines.
  size_t zero_copy_max_bytes = 1 << 20;
  // GPU: a caller's rows that take at least this many bytes, in memory the device sees
  // (AnswerSpan::device: the device's pinned answer memory), are written into its answer by the
  // device itself (a copy or a launch of their own); smaller ones, and answers in other memory,
  // share one through the slot's pinned buffer, then are copied on the host (a copy or launch costs
  // 2 to 4 us of a CPU, as much as a host copy of about 32 KiB).
  size_t direct_answer_min_bytes = 64 << 10;
  // GPU: threads that read the table file into pinned staging buffers at start-up, each with two
  // buffers of load_chunk_bytes, while the copies to the device run; 0 picks min(8, hardware
  // threads). The staging (2 x readers x chunk) stays within 1 GiB whatever the table's size.
  int load_readers = 0;
  // GPU: bytes of one read and of one host-to-device copy at start-up; 0 picks 16 MiB.
  size_t load_chunk_bytes = 0;
  // GPU: the device memory this store's table may take (its rows, or its cache, plus the batch
  // buffers); 0: what the device has free. A table that does not fit goes to the host tier.
  size_t gpu_budget_bytes = 0;
  // GPU: a table that does not fit is served from pinned host memory with a GPU cache of its most
  // looked-up rows (service/store/gpu/host_tier.h); false: it is refused (RESOURCE_EXHAUSTED).
  bool host_tier = true;
  // GPU, host tier: rows put into the cache at start-up, hottest first (as far as they fit).
  std::vector<int64_t> hot_ids;
  // GPU, host tier: ids of each batch that the cache's manager counts, at most (evenly spaced);
  // more learn the hot set sooner and better, at a cost to the manager's thread, which leaves out
  // the batches that come while it is busy. Measured in docs/benchmarks.md section 14.
  size_t cache_samples_per_batch = 16384;
  // Where the stores read the time (stage timings, the completion threads' polling); must
  // outlive them.
  Clock* clock = Clock::Real();
  // Called (once, from a store thread) when the device is lost; must not return. The server
  // injects its own (health NOT_SERVING, then exit); tests record the call.
  std::function<void(const std::string& why)> on_device_lost;
};

}  // namespace emb::service

#endif  // EMB_SERVICE_STORE_STORE_OPTIONS_H_
