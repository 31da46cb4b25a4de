// A trampoline for code that starts the next asynchronous call from the completion of the last.
//
// gRPC may run a completion callback inline, inside the call that started the RPC (a fast
// failure); a closed-loop slot that starts its next call from that callback would then recurse
// once per call. RunTrampolined keeps the stack flat. Per thread; no locking.
#ifndef EMB_CLIENT_BENCH_TRAMPOLINE_H_
#define EMB_CLIENT_BENCH_TRAMPOLINE_H_

#include "absl/functional/any_invocable.h"

namespace emb::client::internal {

// Runs `start` now, unless a RunTrampolined call is already on this thread's stack: then that
// outer call runs `start` after the function it is running returns (last queued, first run).
void RunTrampolined(absl::AnyInvocable<void()> start);

}  // namespace emb::client::internal

#endif  // EMB_CLIENT_BENCH_TRAMPOLINE_H_
