// Batcher: coalesces concurrent LookUp requests on one table into batches, one gather each.
//
// Requests join a bounded FIFO queue. A worker thread forms a batch from the oldest request and
// the ones behind it with the same answer type, up to max_batch_ids ids, waiting at most
// max_queue_delay after the oldest arrived (0: take what is queued now; requests that arrive while
// a batch runs join the next). With max_queue_delay 0 and an asynchronous store, a request that
// finds nothing queued and fewer than inline_batches batches in flight starts its batch on the
// submitting thread: that only enqueues the gather, and saves waking the worker (tens of
// microseconds).
// Pooled requests (bags of ids summed or averaged into one row each) join the same batches: their
// ids go after the plain requests' ids, and the store pools them (EmbeddingStore::LookUpBatch).
// Requests whose deadline passed or that were cancelled are dropped when their batch forms (a
// cancelled one takes no room in it). Each
// batch's ids are concatenated into one int64 tensor and handed to the store together with each
// caller's AnswerBuffer (from a pool of the memory the store writes fastest: pinned for a GPU
// store; neither zero-filled nor freshly page-faulted), which the store fills directly. Then the
// calls are finished: the first caller's on the thread that answered the batch, the others' on
// the finishing threads. A batch counts as in flight until the store answers it (its slot is free
// again then), and as finishing until its last call is finished.
// The table's writer (service/write/table_writer.h) writes rows between batches: PauseBatches
// stops forming batches (and the submitting threads stop starting them) and returns once no
// batch is in flight; batches resume when the pause ends. So no batch reads a table while it is
// written, and a write goes ahead of the lookups already queued. Thread-safe.
#ifndef EMB_SERVICE_BATCH_BATCHER_H_
#define EMB_SERVICE_BATCH_BATCHER_H_

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "kernels/data_type.h"
#include "service/batch/answer_buffer.h"
#include "service/batch/thread_pool.h"
#include "service/common/clock.h"
#include "service/metrics/metrics.h"
#include "service/store/embedding_store.h"

namespace emb::service {

struct BatcherOptions {
  int64_t max_batch_ids = 65536;
  absl::Duration max_queue_delay = absl::ZeroDuration();
  int64_t max_queue_ids = 1 << 20;
  // Batches in flight below which a request that finds the queue empty starts its own batch on the
  // submitting thread (asynchronous stores, max_queue_delay 0); at most the store's
  // max_inflight_batches(), so that such a start never waits for the store. 1: only when the
  // batcher is idle. (On the H200 host, 4 against 1 took 256 x 768 at 16 concurrent calls from
  // 0.74 to 0.84 of the gRPC-only reference: docs/decisions.md, "Inline batches only when the
  // batcher is idle".)
  int inline_batches = 4;
  // Threads that finish the calls after a batch's first (0: the batch's own thread finishes all).
  int answer_threads = 0;
  // Where answer buffers come from: the pool of the store's device, which the server makes (for a
  // GPU, pinned memory the device writes into directly); must outlive the batcher. nullptr: the
  // batcher's own pool of ordinary memory.
  AnswerBufferPool* answer_pool = nullptr;
};

class Batcher {
 public:
  struct Request {
    absl::Span<const int64_t> ids;  // checked by the caller; valid until `done` runs
    DataType out_type = DataType::kFloat32;
    AnswerBuffer* out = nullptr;  // holds the rows when `done` runs with OK (else empty)
    absl::Time deadline = absl::InfiniteFuture();
    // Set (by any thread) once the caller has gone, e.g. its client reset the stream: the request
    // leaves the queue with the next batch, uncounted against that batch's ids, and is finished
    // CANCELLED instead of gathered. May be nullptr; must stay valid until `done` runs.
    const std::atomic<bool>* cancelled = nullptr;
    absl::AnyInvocable<void(const absl::Status&)> done;

    // A pooled request answers a row per bag of its ids (checked by the caller): bag b is
    // ids[offsets[b] .. offsets[b + 1]), offsets running from 0 to ids.size(). Pooled requests
    // join batches with plain ones of the same answer type (EmbeddingStore::LookUpBatch).
    bool pooled = false;
    absl::Span<const int64_t> offsets;
    absl::Span<const float> weights;  // empty, or one per id
    bool mean = false;                // each bag's sum divided by its length
    // The rows of the answer: one per id, or one per bag.
    size_t answer_rows() const { return pooled ? offsets.size() - 1 : ids.size(); }
    // What the request counts against the queue's and a batch's limits: its ids or its answer's
    // rows, whichever are more (a store's buffers hold max_batch_ids of each).
    int64_t size() const { return static_cast<int64_t>(std::max(ids.size(), answer_rows())); }
  };

  // `store`, `metrics` and `clock` must outlive the batcher. Starts the worker thread. Batches
  // hold at most min(options.max_batch_ids, store->max_batch_ids()) ids.
  Batcher(EmbeddingStore* store, BatcherOptions options, TableMetrics metrics,
          Clock* clock = Clock::Real());
  // Calls Shutdown().
  ~Batcher();
  Batcher(const Batcher&) = delete;
  Batcher& operator=(const Batcher&) = delete;

  // Queues `request`. On OK its `done` runs exactly once, on a batcher or store thread (or, for a
  // request dropped as it starts on the submitting thread, before Submit returns).
  // Otherwise `done` is not called: RESOURCE_EXHAUSTED when the queue holds max_queue_ids ids
  // already, INVALID_ARGUMENT for more than max_batch_ids ids, UNAVAILABLE after Shutdown().
  absl::Status Submit(Request request);

  // Batches held: while one lives, no batch starts (requests queue, and go on in order once the
  // last pause ends). Move-only; must end before the batcher's Shutdown.
  class BatchPause {
   public:
    BatchPause(BatchPause&& other) noexcept : batcher_(std::exchange(other.batcher_, nullptr)) {}
    BatchPause& operator=(BatchPause&&) = delete;
    BatchPause(const BatchPause&) = delete;
    ~BatchPause() {
      if (batcher_ != nullptr) {
        batcher_->Resume();
      }
    }

   private:
    friend class Batcher;
    explicit BatchPause(Batcher* batcher) : batcher_(batcher) {}
    Batcher* batcher_;
  };

  // Stops batches at the next boundary: returns once the store has answered every batch in
  // flight, and no batch starts until the returned pause ends. For the table's writer, which
  // writes rows between batches.
  [[nodiscard]] BatchPause PauseBatches();

  // Stops taking requests, runs every queued one, and waits until every batch is answered.
  void Shutdown();

  int64_t queued_ids_for_test() const;
  int pauses_for_test() const;

 private:
  struct Entry {
    Request request;
    absl::Time enqueued;
  };
  struct Batch;

  void Run();
  // Ends a BatchPause.
  void Resume();
  // Removes the next batch's entries from the queue; empty when the queue is empty.
  std::vector<Entry> TakeBatch() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Dispatch(std::vector<Entry> entries);
  // Appends the bags of the pooled request `r` to `batch`, whose ids do not yet hold r's.
  static void AddBags(const Request& r, Batch& batch);
  struct Finishing;
  // Records the batch's stage times, then finishes the first caller's call and hands the others
  // to the finishing threads.
  void Answer(Batch& batch, const absl::Status& status, const StageTimes& times);
  // Finishes caller i of `f`; whichever call is finished last ends the batch.
  void FinishCall(Finishing& f, size_t i);

  EmbeddingStore* const store_;
  const BatcherOptions options_;
  const TableMetrics metrics_;
  Clock* const clock_;
  const size_t dim_;
  // Used where options.answer_pool is nullptr.
  std::unique_ptr<AnswerBufferPool> own_answer_pool_;
  AnswerBufferPool* const answer_pool_;
  // Batches in flight below which a request that finds the queue empty starts its batch on the
  // submitting thread; 0: never.
  const int64_t inline_batches_;

  mutable absl::Mutex mu_;
  std::deque<Entry> queue_ ABSL_GUARDED_BY(mu_);
  int64_t queued_ids_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t inflight_ ABSL_GUARDED_BY(mu_) = 0;   // batches the store has not answered
  int64_t finishing_ ABSL_GUARDED_BY(mu_) = 0;  // answered batches with calls left to finish
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // BatchPauses alive (or waiting for the batches in flight): while above 0, no batch starts.
  int pauses_ ABSL_GUARDED_BY(mu_) = 0;
  // After mu_, so that its threads (which end batches under mu_) are joined before mu_ goes.
  ThreadPool finishers_;
  std::thread worker_;
};

}  // namespace emb::service

#endif  // EMB_SERVICE_BATCH_BATCHER_H_
