// InFlightBatches: which batches may still read a cache's old picture of its rows, so that its
// manager reuses a slot only after every batch that could still read the slot's old row has
// ended (a grace period, as read-copy-update waits for readers).
//
// A store calls Begin before it enqueues a batch's reads and End once they are done; the manager
// changes the picture (no new batch can read the old one once the change is visible), then calls
// WaitForEarlier, which returns once every batch begun before it has ended. Thread-safe.
#ifndef EMB_SERVICE_STORE_CACHE_IN_FLIGHT_BATCHES_H_
#define EMB_SERVICE_STORE_CACHE_IN_FLIGHT_BATCHES_H_

#include <cstdint>
#include <set>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace emb::service {

class InFlightBatches {
 public:
  // A ticket for End.
  uint64_t Begin() {
    absl::MutexLock lock(&mu_);
    const uint64_t ticket = next_++;
    open_.insert(ticket);
    return ticket;
  }
  void End(uint64_t ticket) {
    absl::MutexLock lock(&mu_);
    open_.erase(ticket);
  }
  // Blocks until no batch begun before this call is open.
  void WaitForEarlier() {
    absl::MutexLock lock(&mu_);
    const uint64_t first_later = next_;
    auto ended = [this, first_later]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return open_.empty() || *open_.begin() >= first_later;
    };
    mu_.Await(absl::Condition(&ended));
  }
  // Batches open now.
  size_t open() const {
    absl::MutexLock lock(&mu_);
    return open_.size();
  }

 private:
  mutable absl::Mutex mu_;
  uint64_t next_ ABSL_GUARDED_BY(mu_) = 0;
  std::set<uint64_t> open_ ABSL_GUARDED_BY(mu_);
};

}  // namespace emb::service

#endif  // EMB_SERVICE_STORE_CACHE_IN_FLIGHT_BATCHES_H_
