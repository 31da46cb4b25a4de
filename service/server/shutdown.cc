// EmbeddingServer's shutdown sequence (SetNotServing, then Shutdown) and its destructor.
#include <algorithm>
#include <cstdint>
#include <thread>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "grpc/grpc.h"
#include "service/server/server.h"

namespace emb::service {
namespace {

// Shutdown: how long the service holds new calls at most (see Shutdown), and how long no new
// call must arrive before it stops holding.
constexpr absl::Duration kMaxHold = absl::Seconds(1);
constexpr absl::Duration kHoldQuiet = absl::Milliseconds(100);
// Shutdown: how long after the last answer the connections that clients left open are cut.
constexpr absl::Duration kCloseGrace = absl::Seconds(1);
}  // namespace

void EmbeddingServer::SetNotServing() {
  if (health_ != nullptr) {
    health_->SetServing(false);
  }
}

void EmbeddingServer::Shutdown(absl::Time deadline) {
  if (shut_down_) {
    return;
  }
  shut_down_ = true;
  stop_polling_.Notify();
  if (version_poller_.joinable()) {
    version_poller_.join();
  }
  if (health_ != nullptr) {
    health_->Shutdown();  // NOT_SERVING, and the Watch streams end
  }
  if (admin_server_ != nullptr) {
    // Writes stop first: each stream ends UNAVAILABLE once the message being applied, if any,
    // is answered (the batchers still run), so every answered message is applied.
    admin_->Shutdown();
    admin_server_->Shutdown(absl::ToChronoTime(deadline));
    admin_server_->Wait();
  }
  if (server_ != nullptr) {
    // gRPC's own shutdown sends GOAWAY, then answers CANCELLED to every call that reaches it
    // before the client has read the GOAWAY (grpc/grpc#41785). So first the service holds new
    // calls unanswered until the calls it had accepted are answered and the callers that waited
    // for them have sent their next call: then no such caller has a call on the way. gRPC's
    // shutdown starts (the listener closes, GOAWAY goes out on every connection, ahead of
    // anything written after it), and only then are the held calls answered UNAVAILABLE: their
    // callers retry on a new connection, which goes elsewhere.
    service_->HoldNewCalls();
    WaitUntilOnlyHeldCallsRemain(std::min(deadline, absl::Now() + kMaxHold));
    grpc_completion_queue* cq = grpc_completion_queue_create_for_next(nullptr);
    grpc_server_shutdown_and_notify(server_->c_server(), cq, /*tag=*/nullptr);
    service_->RefuseCalls();
    // gRPC's Shutdown returns once every call is answered and every connection is closed. A
    // client closes its connection once it has read the GOAWAY and its answers, but an idle one
    // may not read for seconds (a synchronous client polls only during its calls), so the
    // connections still open kCloseGrace after the last answer are cut: by then any answer
    // written to them has long been read, and no new call can reach a handler.
    absl::Notification done;
    std::thread closer([this, deadline, &done] {
      while (active_calls_.count() > 0 && absl::Now() < deadline && !done.HasBeenNotified()) {
        absl::SleepFor(absl::Milliseconds(1));  // polled: gRPC has no "no call in flight" event
      }
      if (!done.WaitForNotificationWithTimeout(
              std::max(absl::ZeroDuration(), std::min(kCloseGrace, deadline - absl::Now())))) {
        grpc_server_cancel_all_calls(server_->c_server());
      }
    });
    server_->Shutdown(absl::ToChronoTime(deadline));
    done.Notify();
    closer.join();
    grpc_completion_queue_shutdown(cq);
    while (grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_REALTIME), nullptr).type !=
           GRPC_QUEUE_SHUTDOWN) {
    }
    grpc_completion_queue_destroy(cq);
  }
  for (ServedTable& t : tables_) {
    t.writer->Shutdown();  // the writes it took are written first, between batches
    t.batcher->Shutdown();
  }
  if (server_ != nullptr) {
    server_->Wait();
  }
}

void EmbeddingServer::WaitUntilOnlyHeldCallsRemain(absl::Time until) const {
  // Polled: gRPC offers no event for "no call in flight"; this runs once, at shutdown.
  int64_t held = -1;
  absl::Time changed = absl::Now();
  while (absl::Now() < until) {
    const int64_t now_held = service_->held_calls();
    if (now_held != held) {
      held = now_held;
      changed = absl::Now();
    }
    if (active_calls_.count() <= held && absl::Now() - changed >= kHoldQuiet) {
      return;
    }
    absl::SleepFor(absl::Milliseconds(1));
  }
}

EmbeddingServer::~EmbeddingServer() {
  Shutdown(absl::Now());
  // The metrics port closes before the tables go: the cache metrics read their stores.
  exposer_.reset();
}

}  // namespace emb::service
