#include "service/store/gpu/batch_completer.h"

#include <cuda_runtime_api.h>

#include <cstring>
#include <utility>

namespace emb::service {

BatchCompleter::BatchCompleter(SlotPool* slots, const CudaCheck& check, const StoreOptions& options,
                               int threads)
    : slots_(slots),
      check_(check),
      clock_(options.clock),
      poll_(options.completion_poll),
      poll_min_gap_(options.completion_poll_min_gap) {
  for (int i = 0; i < threads; ++i) {
    threads_.emplace_back([this] { Run(); });
  }
}

BatchCompleter::~BatchCompleter() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  for (std::thread& t : threads_) {
    t.join();
  }
}

void BatchCompleter::Push(BatchSlot* slot) {
  const absl::Time now = clock_->Now();
  absl::MutexLock lock(&mu_);
  if (last_batch_start_ != absl::InfinitePast()) {
    mean_batch_gap_ += (now - last_batch_start_ - mean_batch_gap_) / 8;
  }
  last_batch_start_ = now;
  in_flight_.push_back(slot);
  in_flight_size_.store(in_flight_.size(), std::memory_order_release);
}

absl::Status BatchCompleter::Finish(BatchSlot& slot, StageTimes* times) {
  absl::Status s = check_(cudaEventSynchronize(slot.copied_out.get()), "batch");
  if (!s.ok()) {
    return s;
  }
  if (slot.zero_copy) {
    float ms = 0;
    (void)cudaEventElapsedTime(&ms, slot.start.get(), slot.copied_out.get());
    times->gather = ms / 1e3;  // the copies are inside the kernel
  } else {
    float ms[3] = {0, 0, 0};
    (void)cudaEventElapsedTime(&ms[0], slot.start.get(), slot.copied_in.get());
    (void)cudaEventElapsedTime(&ms[1], slot.copied_in.get(), slot.gathered.get());
    (void)cudaEventElapsedTime(&ms[2], slot.gathered.get(), slot.copied_out.get());
    times->copy_in = ms[0] / 1e3;
    times->gather = ms[1] / 1e3;
    times->copy_out = ms[2] / 1e3;
  }
  if (!slot.staged.empty()) {
    const absl::Time copy_start = clock_->Now();
    for (const BatchSlot::Staged& piece : slot.staged) {
      std::memcpy(piece.dst, slot.h_out.data() + piece.offset, piece.bytes);
    }
    times->host_copy = SecondsSince(clock_, copy_start);
  }
  return absl::OkStatus();
}

void BatchCompleter::Run() {
  (void)cudaSetDevice(check_.device());
  bool answered = false;
  for (;;) {
    // A thread that has just answered a batch may poll for the next one instead of sleeping.
    BatchSlot* slot = Next(/*may_poll=*/answered);
    if (slot == nullptr) {
      return;
    }
    StageTimes times;
    const absl::Status s = Finish(*slot, &times);
    // The rows are in the callers' buffers: the slot is free for the next batch while `done`
    // finishes calls (a gRPC send of hundreds of microseconds for a large answer).
    EmbeddingStore::Done done = std::move(slot->done);
    slots_->Release(slot);
    done(s, s.ok() ? times : StageTimes{});
    answered = true;
  }
}

BatchSlot* BatchCompleter::Next(bool may_poll) {
  // While a thread polls, a batch that arrives is its to take: waking a sleeper for it is what
  // polling saves. `polling_` changes only under mu_, so that the sleepers' condition below is a
  // function of state mu_ guards, as absl::Condition requires (an atomic read there broke the
  // Mutex's waiter bookkeeping under load).
  bool poll = false;
  if (may_poll && poll_ > absl::ZeroDuration()) {
    absl::MutexLock lock(&mu_);
    poll = !polling_ && !stopping_ && in_flight_.empty() && mean_batch_gap_ >= poll_min_gap_;
    polling_ = polling_ || poll;
  }
  if (poll) {
    PollForWork();
  }
  absl::MutexLock lock(&mu_);
  if (poll) {
    polling_ = false;  // the unlock below wakes a sleeper for any batch behind the one taken
  }
  mu_.Await(absl::Condition(
      +[](BatchCompleter* c) ABSL_NO_THREAD_SAFETY_ANALYSIS {
        return c->stopping_ || (!c->in_flight_.empty() && !c->polling_);
      },
      this));
  if (in_flight_.empty()) {
    return nullptr;
  }
  BatchSlot* slot = in_flight_.front();
  in_flight_.pop_front();
  in_flight_size_.store(in_flight_.size(), std::memory_order_release);
  return slot;
}

void BatchCompleter::PollForWork() const {
  const absl::Time until = clock_->Now() + poll_;
  while (in_flight_size_.load(std::memory_order_acquire) == 0 && clock_->Now() < until) {
#if defined(__x86_64__)
    __builtin_ia32_pause();
#endif
  }
}

}  // namespace emb::service
