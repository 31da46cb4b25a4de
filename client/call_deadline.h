// The deadline of every call the client library makes: a timeout that is positive and finite,
// set on the call's context. Internal to emb::client (not installed).
#ifndef EMB_CLIENT_CALL_DEADLINE_H_
#define EMB_CLIENT_CALL_DEADLINE_H_

#include <grpcpp/client_context.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace emb::client {

// INVALID_ARGUMENT unless `timeout` is positive and finite: the API has no call without a
// deadline.
inline absl::Status CheckTimeout(absl::Duration timeout) {
  if (timeout <= absl::ZeroDuration() || timeout == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("timeout must be positive and finite, got ", absl::FormatDuration(timeout)));
  }
  return absl::OkStatus();
}

// Sets the deadline of `ctx`'s call to `timeout` from now.
inline void SetDeadline(absl::Duration timeout, grpc::ClientContext* ctx) {
  ctx->set_deadline(absl::ToChronoTime(absl::Now() + timeout));
}

}  // namespace emb::client

#endif  // EMB_CLIENT_CALL_DEADLINE_H_
