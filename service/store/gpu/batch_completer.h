// BatchCompleter: a GpuStore's completion threads. They take the batches the store enqueued, in
// enqueue order, wait for each on the device, copy its staged rows into the callers' buffers,
// hand its slot back to the SlotPool and call its `done`, so several batches are answered at once.
//
// A completion thread that has just answered polls briefly for the next batch instead of
// sleeping, since waking a thread costs more than a small batch's whole gather; it does so only
// while batches come sparsely (options.completion_poll_min_gap), since under a steady stream the
// spinning core costs more than the wake-ups (figures: docs/decisions.md, "Completion polling
// after every batch" and "Sleeping completion threads"). One thread polls at a
// time.
//
// Ownership: Push() hands a slot (holding an enqueued batch and its `done`) to the completer; the
// thread that takes it owns it until it releases it to the pool, just before calling `done`.
// Thread-safe.
#ifndef EMB_SERVICE_STORE_GPU_BATCH_COMPLETER_H_
#define EMB_SERVICE_STORE_GPU_BATCH_COMPLETER_H_

#include <atomic>
#include <cstddef>
#include <deque>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "service/common/clock.h"
#include "service/store/gpu/batch_slots.h"
#include "service/store/gpu/cuda_check.h"
#include "service/store/store_options.h"

namespace emb::service {

class BatchCompleter {
 public:
  // Starts `threads` completion threads on check.device(). `slots` must outlive the completer;
  // options.completion_poll, completion_poll_min_gap and clock are read.
  BatchCompleter(SlotPool* slots, const CudaCheck& check, const StoreOptions& options, int threads);
  // Waits for the batches pushed so far to be answered, then stops the threads.
  ~BatchCompleter();
  BatchCompleter(const BatchCompleter&) = delete;
  BatchCompleter& operator=(const BatchCompleter&) = delete;

  // Hands over `slot`, whose batch is enqueued on its stream up to its copied_out event.
  void Push(BatchSlot* slot);

 private:
  void Run();
  // Waits for `slot`'s batch, copies its staged rows, and returns the stage times and status.
  absl::Status Finish(BatchSlot& slot, StageTimes* times);
  // The next batch in enqueue order; nullptr once stopping with none left. With `may_poll`, and
  // no other thread polling, polls (see PollForWork) before it sleeps.
  BatchSlot* Next(bool may_poll);
  // Spins, without mu_, until a batch is in flight or completion_poll has passed.
  void PollForWork() const;

  SlotPool* const slots_;
  const CudaCheck check_;
  Clock* const clock_;
  const absl::Duration poll_;
  const absl::Duration poll_min_gap_;

  absl::Mutex mu_;
  std::deque<BatchSlot*> in_flight_ ABSL_GUARDED_BY(mu_);  // in enqueue order
  std::atomic<size_t> in_flight_size_{0};                  // in_flight_.size(), read without mu_
  // A thread is polling for the next batch; sleepers leave new batches to it.
  bool polling_ ABSL_GUARDED_BY(mu_) = false;
  // When the last batch started, and the moving mean of the time between batch starts (from a
  // second, so that a new store polls).
  absl::Time last_batch_start_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  absl::Duration mean_batch_gap_ ABSL_GUARDED_BY(mu_) = absl::Seconds(1);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;  // last: they start once the rest is set
};

}  // namespace emb::service

#endif  // EMB_SERVICE_STORE_GPU_BATCH_COMPLETER_H_
