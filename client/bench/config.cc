#include "client/bench/config.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace emb::client {

absl::Status ValidateBenchConfig(const BenchConfig& c) {
  if (c.connections < 1 || c.concurrency < 1 || c.max_inflight < 1) {
    return absl::InvalidArgumentError("connections, concurrency and max_inflight must be >= 1");
  }
  if (c.blocking && c.rps == 0 && c.concurrency > kMaxBlockingSlots) {
    return absl::InvalidArgumentError(absl::StrCat("blocking runs a thread per slot: concurrency ",
                                                   c.concurrency, " is over the limit of ",
                                                   kMaxBlockingSlots, "; use callbacks"));
  }
  if (!(c.rps >= 0) || std::isinf(c.rps)) {
    return absl::InvalidArgumentError("rps must be >= 0 and finite");
  }
  if (c.ids_per_request < 1) {
    return absl::InvalidArgumentError("ids_per_request must be >= 1");
  }
  if (c.requests < 0) {
    return absl::InvalidArgumentError("requests must be >= 0");
  }
  if (c.pool_requests < 0) {
    return absl::InvalidArgumentError("pool_requests must be >= 0");
  }
  if (c.requests == 0 &&
      (c.duration <= absl::ZeroDuration() || c.duration == absl::InfiniteDuration())) {
    return absl::InvalidArgumentError("duration must be positive and finite (or set requests)");
  }
  if (c.warmup < absl::ZeroDuration() || c.warmup == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError("warmup must be >= 0 and finite");
  }
  if (c.timeout <= absl::ZeroDuration() || c.timeout == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError("timeout must be positive and finite");
  }
  if (c.max_recv_message_bytes < -1 || c.max_recv_message_bytes == 0 ||
      c.max_recv_message_bytes > int64_t{2147483647}) {
    return absl::InvalidArgumentError(
        "max_recv_message_bytes must be -1 (no limit) or in [1, 2^31 - 1]");
  }
  return absl::OkStatus();
}

}  // namespace emb::client
