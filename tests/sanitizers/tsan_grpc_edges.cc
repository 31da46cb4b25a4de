// ThreadSanitizer builds only (EMB_SANITIZE=thread): tells TSan the one ordering that Debian's
// gRPC, built without TSan, guarantees and does through synchronization TSan cannot see: the
// operations started with a completion-queue tag happen before that tag's completion is
// delivered. Without it every field that gRPC's own C++ headers (compiled into our objects, so
// instrumented) set when a call's operations start and read when they complete on another thread
// is reported as a race, and so is every field of ours handed across a gRPC callback.
//
// It adds happens-before edges only (acquire/release on the tag's address); it hides no report.
// The functions below interpose gRPC's: an executable that defines them is searched before
// libgrpc.so, so libgrpc++ and libgrpc itself (which calls grpc_cq_end_op through its PLT) reach
// these first, and these forward to the real ones found with dlsym(RTLD_NEXT).
//
//   grpc_call_start_batch(tag)  release(tag)    the thread that starts the operations
//   grpc_cq_end_op(tag)         acquire(tag),   the thread that completes them, and runs a
//                               release(tag)    callback tag's functor or hands it on through
//                                               gRPC's Executor (an absl::Mutex TSan sees)
//   grpc_completion_queue_next  acquire(tag)    the thread that takes a completion off a queue
//   / _pluck                                    (the synchronous API)
#include <dlfcn.h>
#include <sanitizer/tsan_interface.h>

#include <cstdio>
#include <cstdlib>
#include <utility>

#include "absl/status/status.h"
#include "grpc/grpc.h"

struct grpc_cq_completion;

namespace {

// The next definition of `name` after this executable's (libgrpc's); aborts if there is none.
void* Next(const char* name) {
  void* f = dlsym(RTLD_NEXT, name);
  if (f == nullptr) {
    std::fprintf(stderr, "tsan_grpc_edges: no %s after the executable: %s\n", name, dlerror());
    std::abort();
  }
  return f;
}

grpc_event Acquired(grpc_event ev) {
  if (ev.type == GRPC_OP_COMPLETE) {
    __tsan_acquire(ev.tag);
  }
  return ev;
}

}  // namespace

extern "C" grpc_call_error grpc_call_start_batch(grpc_call* call, const grpc_op* ops, size_t nops,
                                                 void* tag, void* reserved) {
  using Fn = grpc_call_error (*)(grpc_call*, const grpc_op*, size_t, void*, void*);
  static const auto next = reinterpret_cast<Fn>(Next("grpc_call_start_batch"));
  __tsan_release(tag);
  return next(call, ops, nops, tag, reserved);
}

extern "C" grpc_event grpc_completion_queue_next(grpc_completion_queue* cq, gpr_timespec deadline,
                                                 void* reserved) {
  using Fn = grpc_event (*)(grpc_completion_queue*, gpr_timespec, void*);
  static const auto next = reinterpret_cast<Fn>(Next("grpc_completion_queue_next"));
  return Acquired(next(cq, deadline, reserved));
}

extern "C" grpc_event grpc_completion_queue_pluck(grpc_completion_queue* cq, void* tag,
                                                  gpr_timespec deadline, void* reserved) {
  using Fn = grpc_event (*)(grpc_completion_queue*, void*, gpr_timespec, void*);
  static const auto next = reinterpret_cast<Fn>(Next("grpc_completion_queue_pluck"));
  return Acquired(next(cq, tag, deadline, reserved));
}

// gRPC 1.51's src/core/lib/surface/completion_queue.h (a C++ function, exported by libgrpc.so).
void grpc_cq_end_op(grpc_completion_queue* cq, void* tag, absl::Status error,
                    void (*done)(void* done_arg, grpc_cq_completion* storage), void* done_arg,
                    grpc_cq_completion* storage, bool internal) {
  using Fn = void (*)(grpc_completion_queue*, void*, absl::Status,
                      void (*)(void*, grpc_cq_completion*), void*, grpc_cq_completion*, bool);
  static const auto next = reinterpret_cast<Fn>(
      Next("_Z14grpc_cq_end_opP21grpc_completion_queuePvN4absl7debian36StatusEPFvS1_P18grpc_cq_"
           "completionES1_S6_b"));
  __tsan_acquire(tag);
  __tsan_release(tag);
  next(cq, tag, std::move(error), done, done_arg, storage, internal);
}
