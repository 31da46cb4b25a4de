// MemoryReturner: gives the memory that the C library's allocator holds free back to the system.
//
// glibc keeps what is freed in its arenas and returns to the system only what lies at the top of a
// heap. A burst of short-lived calls (a rapid-reset attack: 200k-300k streams opened and reset in
// seconds, each a call that gRPC allocates and frees) left the resident set at its peak, 3 to 5
// GB, after the calls were gone. A thread looks every `period` at how much the
// allocator holds free and, past `threshold_bytes` (and once the resident set has grown by as
// much since the last trim), trims (malloc_trim: free pages anywhere in the heaps go back to the
// system), logging what the resident set gave back.
//
// Thread-safe.
#ifndef EMB_SERVICE_SERVER_MEMORY_RETURNER_H_
#define EMB_SERVICE_SERVER_MEMORY_RETURNER_H_

#include <atomic>
#include <cstdint>
#include <thread>

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

namespace emb::service {

class MemoryReturner {
 public:
  MemoryReturner(absl::Duration period, uint64_t threshold_bytes);
  ~MemoryReturner();  // stops the thread and joins it

  MemoryReturner(const MemoryReturner&) = delete;
  MemoryReturner& operator=(const MemoryReturner&) = delete;

  // Resident bytes given back by trims so far (the resident set's drop across each trim).
  uint64_t returned_bytes() const { return returned_bytes_.load(std::memory_order_relaxed); }

 private:
  void Run(absl::Duration period, uint64_t threshold_bytes);

  std::atomic<uint64_t> returned_bytes_{0};
  absl::Notification stop_;
  std::thread thread_;
};

}  // namespace emb::service

#endif  // EMB_SERVICE_SERVER_MEMORY_RETURNER_H_
