#include "service/write/table_writer.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"

namespace emb::service {

TableWriter::TableWriter(EmbeddingStore* store, Batcher* batcher, TableMetrics metrics,
                         WriterOptions options, Clock* clock)
    : store_(store),
      batcher_(batcher),
      metrics_(metrics),
      options_(options),
      clock_(clock),
      last_sequence_(options.initial_sequence),
      thread_([this] { Run(); }) {}

TableWriter::~TableWriter() { Shutdown(); }

absl::Status TableWriter::Submit(Update update) {
  absl::MutexLock lock(&mu_);
  if (stopping_) {
    return absl::UnavailableError("the server is shutting down");
  }
  if (queue_.size() >= options_.max_queued) {
    return absl::ResourceExhaustedError(
        absl::StrCat(queue_.size(), " writes wait for table '", store_->info().name,
                     "''s writer already, its limit (", options_.max_queued,
                     ", behind those being written); retry when one has been answered"));
  }
  queue_.push_back(Write{std::move(update), nullptr});
  return absl::OkStatus();
}

absl::Status TableWriter::SwapVersion(std::unique_ptr<PreparedTable> table, int64_t sequence) {
  absl::Notification swapped;
  absl::Status status;
  Update swap;
  swap.table = std::move(table);
  swap.sequence = sequence;
  swap.received = clock_->Now();
  swap.done = [&](const absl::StatusOr<int64_t>& done) {
    status = done.status();
    swapped.Notify();
  };
  if (absl::Status s = Submit(std::move(swap)); !s.ok()) {
    return s;
  }
  swapped.WaitForNotification();
  return status;
}

absl::Status TableWriter::WithUpdatesPaused(absl::FunctionRef<absl::Status(int64_t sequence)> fn) {
  {
    absl::MutexLock lock(&mu_);
    ++paused_;
    mu_.Await(absl::Condition(
        +[](TableWriter* w) ABSL_NO_THREAD_SAFETY_ANALYSIS { return !w->writing_; }, this));
  }
  absl::Status s = fn(last_sequence_.load(std::memory_order_acquire));
  absl::MutexLock lock(&mu_);
  --paused_;
  return s;
}

void TableWriter::Shutdown() {
  absl::MutexLock shutdown(&shutdown_mu_);
  std::deque<Write> cancelled;
  std::thread thread;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    cancelled.swap(queue_);
    thread = std::move(thread_);
  }
  for (Write& w : cancelled) {
    w.update.done(absl::UnavailableError(absl::StrCat(
        "the server is shutting down: this write waited behind others for table '",
        store_->info().name,
        "''s writer and was not started; nothing of it was written, resume from the table's "
        "sequence after the restart or on another replica")));
  }
  if (thread.joinable()) {
    thread.join();  // the writes it took are written and answered first
  }
}

std::deque<TableWriter::Write> TableWriter::Take() {
  std::deque<Write> taken;
  size_t bytes = 0;
  while (!queue_.empty()) {
    const size_t next = queue_.front().update.rows.size();
    if (!taken.empty() && bytes + next > options_.max_prepared_bytes) {
      break;
    }
    bytes += next;
    taken.push_back(std::move(queue_.front()));
    queue_.pop_front();
  }
  return taken;
}

void TableWriter::Run() {
  for (;;) {
    std::deque<Write> writes;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](TableWriter* w)
               ABSL_NO_THREAD_SAFETY_ANALYSIS { return w->stopping_ || !w->queue_.empty(); },
          this));
      if (queue_.empty()) {
        return;  // stopping: Shutdown() answered the waiting writes
      }
      writes = Take();
    }
    // The slow part while batches run; a message that cannot be prepared is answered now.
    std::vector<Write*> ready;
    for (Write& w : writes) {
      if (w.update.table != nullptr || Prepare(w)) {
        ready.push_back(&w);
      }
    }
    if (!ready.empty()) {
      {
        absl::MutexLock lock(&mu_);
        mu_.Await(absl::Condition(
            +[](TableWriter* w) ABSL_NO_THREAD_SAFETY_ANALYSIS { return w->paused_ == 0; }, this));
        writing_ = true;
      }
      {
        const Batcher::BatchPause boundary = batcher_->PauseBatches();
        for (Write* w : ready) {
          Apply(*w);
        }
      }
      // Answered once the batches run again: the rows are visible to every batch from here, and
      // an answer (gRPC may write it to the socket on this thread) holds no batch back.
      for (Write* w : ready) {
        w->prepared.reset();  // its staging memory goes back to the store
        w->update.done(std::move(w->outcome));
      }
      absl::MutexLock lock(&mu_);
      writing_ = false;
    }
    // A swapped-out version's memory goes here, while batches run again.
  }
}

bool TableWriter::Prepare(Write& w) {
  const Update& u = w.update;
  absl::Span<const int64_t> ids = u.ids;
  // The store's rows for the ids (checked to be the store's own), where they differ.
  const std::vector<int64_t> local_ids = store_->info().ids.ToLocalCopy(ids);
  if (!local_ids.empty()) {
    ids = local_ids;
  }
  absl::StatusOr<std::unique_ptr<PreparedRows>> prepared =
      store_->PrepareRows(ids, u.rows_type, u.rows);
  if (!prepared.ok()) {
    w.update.done(prepared.status());
    return false;
  }
  w.prepared = *std::move(prepared);
  return true;
}

void TableWriter::Apply(Write& w) {
  Update& u = w.update;
  if (u.table != nullptr) {
    if (absl::Status s = store_->SwapTable(*u.table); !s.ok()) {
      w.outcome = s;
      return;
    }
    last_sequence_.store(u.sequence, std::memory_order_release);
    metrics_.update_sequence->Set(static_cast<double>(u.sequence));
    w.outcome = int64_t{0};
    return;
  }
  const int64_t last = last_sequence_.load(std::memory_order_relaxed);
  if (u.sequence <= last) {
    w.outcome = absl::FailedPreconditionError(absl::StrCat(
        "sequence ", u.sequence, " for table '", store_->info().name,
        "' does not increase: the last applied is ", last, "; nothing of this message applied"));
    return;
  }
  if (absl::Status s = store_->WriteRows(*w.prepared); !s.ok()) {
    w.outcome = s;
    return;
  }
  const int64_t written = w.prepared->rows();
  last_sequence_.store(u.sequence, std::memory_order_release);
  updated_rows_.fetch_add(written, std::memory_order_relaxed);
  metrics_.updated_rows->Increment(static_cast<double>(written));
  metrics_.update_sequence->Set(static_cast<double>(u.sequence));
  const absl::Time now = clock_->Now();
  metrics_.last_update_time->Set(absl::ToDoubleSeconds(now - absl::UnixEpoch()));
  metrics_.update_seconds->Observe(absl::ToDoubleSeconds(now - u.received));
  w.outcome = written;
}

}  // namespace emb::service
