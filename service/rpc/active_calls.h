// ActiveCalls: the number of calls gRPC has accepted and not yet torn down, over every service.
// The call interceptor (call_metrics.h) keeps it; the server owns it and its shutdown sequence
// waits for it to reach zero. It is control state, so it lives apart from Metrics (which only
// exports). Thread-safe.
#ifndef EMB_SERVICE_RPC_ACTIVE_CALLS_H_
#define EMB_SERVICE_RPC_ACTIVE_CALLS_H_

#include <atomic>
#include <cstdint>

namespace emb::service {

class ActiveCalls {
 public:
  void Started() { count_.fetch_add(1, std::memory_order_relaxed); }
  void Done() { count_.fetch_sub(1, std::memory_order_relaxed); }
  int64_t count() const { return count_.load(); }

 private:
  std::atomic<int64_t> count_{0};
};

}  // namespace emb::service

#endif  // EMB_SERVICE_RPC_ACTIVE_CALLS_H_
