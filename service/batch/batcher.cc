#include "service/batch/batcher.h"

#include <algorithm>
#include <atomic>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace emb::service {
namespace {

// The options, with batches no larger than the store's buffers were sized for.
BatcherOptions FitToStore(BatcherOptions options, const EmbeddingStore& store) {
  options.max_batch_ids = std::min(options.max_batch_ids, store.max_batch_ids());
  return options;
}

bool IsCancelled(const Batcher::Request& r) {
  return r.cancelled != nullptr && r.cancelled->load(std::memory_order_relaxed);
}

}  // namespace

// A formed batch: its callers and the concatenated ids, alive until its rows are answered.
struct Batcher::Batch {
  std::vector<Entry> entries;  // the plain requests first, then the pooled ones
  std::vector<int64_t> ids;
  std::vector<AnswerSpan> outs;  // each caller's answer buffer
  DataType out_type;
  // The pooled requests' bags, as EmbeddingStore::LookUpBatch takes them (empty: none).
  std::vector<int64_t> offsets;
  std::vector<float> weights;
  std::vector<float> scales;
  size_t answer_rows = 0;
};

// A batch whose rows are in its callers' buffers, alive until its last call is finished.
struct Batcher::Finishing {
  Finishing(std::vector<Entry> e, absl::Status s, absl::Time start)
      : entries(std::move(e)), status(std::move(s)), start(start), left(entries.size()) {}

  std::vector<Entry> entries;
  const absl::Status status;
  const absl::Time start;
  std::atomic<size_t> left;  // calls not yet finished
};

Batcher::Batcher(EmbeddingStore* store, BatcherOptions options, TableMetrics metrics, Clock* clock)
    : store_(store),
      options_(FitToStore(options, *store)),
      metrics_(metrics),
      clock_(clock),
      dim_(static_cast<size_t>(store->info().dim)),
      own_answer_pool_(options.answer_pool == nullptr ? std::make_unique<AnswerBufferPool>()
                                                      : nullptr),
      answer_pool_(options.answer_pool != nullptr ? options.answer_pool : own_answer_pool_.get()),
      inline_batches_(store->asynchronous() && options.max_queue_delay <= absl::ZeroDuration()
                          ? std::clamp(options.inline_batches, 0, store->max_inflight_batches())
                          : 0),
      finishers_(options.answer_threads),
      worker_([this] { Run(); }) {}

Batcher::~Batcher() { Shutdown(); }

absl::Status Batcher::Submit(Request request) {
  const int64_t n = request.size();
  if (n > options_.max_batch_ids) {
    return absl::InvalidArgumentError(
        absl::StrCat(n, " ids exceed the batch limit of ", options_.max_batch_ids));
  }
  std::vector<Entry> start_now;  // the batch this thread starts itself, if any
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) {
      return absl::UnavailableError("the server is shutting down");
    }
    if (queued_ids_ + n > options_.max_queue_ids) {
      return absl::ResourceExhaustedError(
          absl::StrCat("table '", store_->info().name, "' queue is full: ", queued_ids_,
                       " ids queued, limit ", options_.max_queue_ids, "; retry with back-off"));
    }
    if (!queue_.empty() || inflight_ >= inline_batches_ || pauses_ > 0) {
      queued_ids_ += n;
      metrics_.queue_ids->Set(static_cast<double>(queued_ids_));
      queue_.push_back(Entry{std::move(request), clock_->Now()});
      return absl::OkStatus();
    }
    // Nothing to coalesce with, and a slot free: start the batch here (the store only enqueues it).
    ++inflight_;
    metrics_.inflight_batches->Set(static_cast<double>(inflight_));
    start_now.push_back(Entry{std::move(request), clock_->Now()});
  }
  Dispatch(std::move(start_now));
  return absl::OkStatus();
}

Batcher::BatchPause Batcher::PauseBatches() {
  absl::MutexLock lock(&mu_);
  ++pauses_;
  mu_.Await(absl::Condition(
      +[](Batcher* b) ABSL_NO_THREAD_SAFETY_ANALYSIS { return b->inflight_ == 0; }, this));
  return BatchPause(this);
}

void Batcher::Resume() {
  absl::MutexLock lock(&mu_);
  --pauses_;
}

void Batcher::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (worker_.joinable()) {
    worker_.join();
  }
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](Batcher* b)
           ABSL_NO_THREAD_SAFETY_ANALYSIS { return b->inflight_ == 0 && b->finishing_ == 0; },
      this));
}

int64_t Batcher::queued_ids_for_test() const {
  absl::MutexLock lock(&mu_);
  return queued_ids_;
}

int Batcher::pauses_for_test() const {
  absl::MutexLock lock(&mu_);
  return pauses_;
}

std::vector<Batcher::Entry> Batcher::TakeBatch() {
  std::vector<Entry> taken;
  std::optional<DataType> type;  // that of the batch's first live request
  int64_t ids = 0;               // of its live requests
  int64_t removed = 0;           // ids leaving the queue, the cancelled requests' included
  for (auto it = queue_.begin(); it != queue_.end();) {
    const Request& r = it->request;
    const int64_t n = r.size();
    if (!IsCancelled(r)) {
      if (type.has_value() && r.out_type != *type) {
        ++it;
        continue;
      }
      if (ids + n > options_.max_batch_ids) {
        break;
      }
      type = r.out_type;
      ids += n;
    }
    // A cancelled request leaves with this batch, to be dropped, and takes no room in it.
    removed += n;
    taken.push_back(std::move(*it));
    it = queue_.erase(it);
  }
  queued_ids_ -= removed;
  metrics_.queue_ids->Set(static_cast<double>(queued_ids_));
  return taken;
}

void Batcher::Run() {
  for (;;) {
    std::vector<Entry> entries;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](Batcher* b) ABSL_NO_THREAD_SAFETY_ANALYSIS {
            return b->queue_.empty() ? b->stopping_ : b->pauses_ == 0;
          },
          this));
      if (queue_.empty()) {
        return;  // stopping, and nothing left to run
      }
      if (options_.max_queue_delay > absl::ZeroDuration()) {
        // Wait for more requests until the batch is full or the oldest has waited long enough
        // (or a pause comes, which goes first).
        const absl::Time flush_at = queue_.front().enqueued + options_.max_queue_delay;
        const absl::Duration wait = flush_at - clock_->Now();
        mu_.AwaitWithTimeout(absl::Condition(
                                 +[](Batcher* b) ABSL_NO_THREAD_SAFETY_ANALYSIS {
                                   return b->stopping_ || b->pauses_ > 0 ||
                                          b->queued_ids_ >= b->options_.max_batch_ids;
                                 },
                                 this),
                             wait);
        if (pauses_ > 0) {
          continue;
        }
      }
      entries = TakeBatch();
      ++inflight_;
      metrics_.inflight_batches->Set(static_cast<double>(inflight_));
    }
    Dispatch(std::move(entries));
  }
}

void Batcher::Dispatch(std::vector<Entry> entries) {
  auto batch = std::make_unique<Batch>();
  const absl::Time now = clock_->Now();
  size_t total = 0;
  for (Entry& e : entries) {
    Request& r = e.request;
    if (now > r.deadline) {
      metrics_.dropped_deadline->Increment();
      r.done(absl::DeadlineExceededError(absl::StrCat(
          "deadline passed after ", absl::FormatDuration(now - e.enqueued),
          " in the queue of table '", store_->info().name, "', before its batch ran")));
      continue;
    }
    if (IsCancelled(r)) {
      metrics_.dropped_cancelled->Increment();
      r.done(absl::CancelledError("the call was cancelled before its batch ran"));
      continue;
    }
    metrics_.queue_wait_seconds->Observe(absl::ToDoubleSeconds(now - e.enqueued));
    total += r.ids.size();
    batch->entries.push_back(std::move(e));
  }
  if (batch->entries.empty()) {
    absl::MutexLock lock(&mu_);
    --inflight_;
    metrics_.inflight_batches->Set(static_cast<double>(inflight_));
    return;
  }
  // The plain requests' ids first: the store answers a row per id up to the first bag.
  std::stable_partition(batch->entries.begin(), batch->entries.end(),
                        [](const Entry& e) { return !e.request.pooled; });
  batch->out_type = batch->entries.front().request.out_type;  // the same for all
  batch->ids.reserve(total);
  batch->outs.reserve(batch->entries.size());
  const size_t row_bytes = dim_ * ElementSize(batch->out_type);
  for (const Entry& e : batch->entries) {
    const Request& r = e.request;
    if (r.pooled) {
      AddBags(r, *batch);
    }
    batch->ids.insert(batch->ids.end(), r.ids.begin(), r.ids.end());
    // The store's rows for the caller's ids (checked to be the store's own).
    store_->info().ids.ToLocal(absl::MakeSpan(batch->ids).last(r.ids.size()));
    batch->answer_rows += r.answer_rows();
    *r.out = answer_pool_->Acquire(r.answer_rows() * row_bytes);
    batch->outs.push_back(
        AnswerSpan{absl::MakeSpan(r.out->data(), r.out->size()), r.out->device_data()});
  }
  if (!batch->weights.empty()) {
    batch->weights.resize(batch->ids.size(), 1.0f);
  }
  metrics_.batch_ids->Observe(static_cast<double>(total));
  metrics_.batch_requests->Observe(static_cast<double>(batch->entries.size()));
  Batch* raw = batch.get();
  LookUpBatch lookup;
  lookup.ids = raw->ids;
  lookup.out_type = raw->out_type;
  lookup.outs = raw->outs;
  lookup.bags.offsets = raw->offsets;
  lookup.bags.weights = raw->weights;
  lookup.bags.scales = raw->scales;
  store_->LookUp(lookup, [this, batch = std::move(batch)](const absl::Status& status,
                                                          const StageTimes& times) {
    Answer(*batch, status, times);
  });
}

void Batcher::AddBags(const Request& r, Batch& batch) {
  const auto base = static_cast<int64_t>(batch.ids.size());  // where r's ids go
  if (batch.offsets.empty()) {
    batch.offsets.push_back(base);  // the first pooled id
  }
  const size_t first_bag = batch.offsets.size() - 1;
  for (size_t b = 1; b < r.offsets.size(); ++b) {
    batch.offsets.push_back(base + r.offsets[b]);
  }
  if (!r.weights.empty()) {
    // Weights for every id so far (1: an unweighted bag's rows count once, exactly).
    batch.weights.resize(static_cast<size_t>(base), 1.0f);
    batch.weights.insert(batch.weights.end(), r.weights.begin(), r.weights.end());
  } else if (!batch.weights.empty()) {
    batch.weights.resize(static_cast<size_t>(base) + r.ids.size(), 1.0f);
  }
  if (r.mean || !batch.scales.empty()) {
    batch.scales.resize(first_bag, 1.0f);  // the earlier bags' sums stay as they are
    for (size_t b = 0; b + 1 < r.offsets.size(); ++b) {
      const int64_t length = r.offsets[b + 1] - r.offsets[b];
      batch.scales.push_back(!r.mean      ? 1.0f
                             : length > 0 ? 1.0f / static_cast<float>(length)
                                          : 0.0f);
    }
  }
}

void Batcher::Answer(Batch& batch, const absl::Status& status, const StageTimes& times) {
  {
    // The store is done with the batch: its slot may take the next while these calls finish.
    absl::MutexLock lock(&mu_);
    --inflight_;
    ++finishing_;
    metrics_.inflight_batches->Set(static_cast<double>(inflight_));
  }
  if (status.ok()) {
    metrics_.ids->Increment(static_cast<double>(batch.ids.size()));
    metrics_.answer_bytes->Increment(
        static_cast<double>(batch.answer_rows * dim_ * ElementSize(batch.out_type)));
    if (!batch.offsets.empty()) {
      metrics_.pooled_bags->Increment(static_cast<double>(batch.offsets.size() - 1));
    }
    metrics_.gather_seconds->Observe(times.gather);
    if (times.copy_in > 0 || times.copy_out > 0) {
      metrics_.copy_in_seconds->Observe(times.copy_in);
      metrics_.copy_out_seconds->Observe(times.copy_out);
    }
    metrics_.answer_seconds->Observe(times.host_copy);
  } else {
    for (Entry& e : batch.entries) {
      *e.request.out = AnswerBuffer();  // a failed call's buffer goes back to the pool at once
    }
  }
  // Finishing a call serializes its answer and may write it to the socket on the finishing thread
  // (about 150 us for 768 KiB), so only the first caller's call is finished here: the store gets
  // its slot back sooner.
  auto f = std::make_shared<Finishing>(std::move(batch.entries), status, clock_->Now());
  for (size_t i = 1; i < f->entries.size(); ++i) {
    finishers_.Post([this, f, i] { FinishCall(*f, i); });
  }
  FinishCall(*f, 0);
}

void Batcher::FinishCall(Finishing& f, size_t i) {
  f.entries[i].request.done(f.status);
  // acq_rel: the thread that ends the batch comes after every other call's finish.
  if (f.left.fetch_sub(1, std::memory_order_acq_rel) != 1) {
    return;
  }
  metrics_.finish_seconds->Observe(SecondsSince(clock_, f.start));
  absl::MutexLock lock(&mu_);
  --finishing_;
}

}  // namespace emb::service
