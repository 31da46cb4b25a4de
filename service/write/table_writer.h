// TableWriter: the write path of one served table. It holds the table's update sequence and
// writes, in the order they were submitted, the update messages of the admin path and the whole
// versions the version loader swaps in.
//
// Its thread takes the queued writes, prepares each message's rows
// through the store while batches run (EmbeddingStore::PrepareRows: conversion, staging, the copy
// to the device), then writes what it prepared at one batch boundary: it pauses the table's
// batcher (Batcher::PauseBatches: no batch reads the table while it is written), writes each
// message whole (EmbeddingStore::WriteRows) or swaps the version in (SwapTable), lets batches go
// on, and then answers each (an answer may write to the socket: no batch waits for it). So every
// batch formed after a write's answer reads its rows, and nothing of the write path runs on a
// gRPC thread. A message whose sequence
// does not increase writes nothing. Thread-safe.
#ifndef EMB_SERVICE_WRITE_TABLE_WRITER_H_
#define EMB_SERVICE_WRITE_TABLE_WRITER_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "kernels/data_type.h"
#include "service/batch/batcher.h"
#include "service/common/clock.h"
#include "service/metrics/metrics.h"
#include "service/store/embedding_store.h"

namespace emb::service {

struct WriterOptions {
  // The table's last applied sequence as loaded (a saved version's), where updates resume.
  int64_t initial_sequence = 0;
  // Writes that may wait for the writer (each update stream has at most one message waiting);
  // one beyond them is refused RESOURCE_EXHAUSTED.
  size_t max_queued = 1024;
  // The most bytes of update rows prepared ahead of one batch boundary (at least one message):
  // bounds the staging memory the prepared rows hold, while more messages wait their turn.
  size_t max_prepared_bytes = size_t{64} << 20;
};

class TableWriter {
 public:
  struct Update {
    // An update message's rows, checked by the caller (ValidateUpdateRowsRequest): ids in the
    // table's numbering (a shard's from its first row, as the clients send them), `rows` one per
    // id in `rows_type`. The spans stay valid until `done` runs.
    absl::Span<const int64_t> ids;
    DataType rows_type = DataType::kFloat32;
    absl::Span<const std::byte> rows;
    // Or, instead of rows, another version of the whole table (EmbeddingStore::PrepareTable):
    // its `sequence` becomes the last applied one whatever it is (a rollback goes back), and
    // `done` gets 0.
    std::unique_ptr<PreparedTable> table;
    // Must be greater than last_sequence() when the rows are written, else nothing is.
    int64_t sequence = 0;
    // When the message reached the server: the update-latency histogram runs from here to the
    // moment its rows are visible.
    absl::Time received;
    // The rows written (distinct ids) once they are; FAILED_PRECONDITION for a sequence that does
    // not increase; the store's error otherwise (nothing written); UNAVAILABLE when the writer
    // stopped before the message's turn (nothing written).
    absl::AnyInvocable<void(absl::StatusOr<int64_t> written)> done;
  };

  // `store`, `batcher` (the table's, over `store`), `metrics` and `clock` must outlive the writer.
  // Starts the writer's thread.
  TableWriter(EmbeddingStore* store, Batcher* batcher, TableMetrics metrics, WriterOptions options,
              Clock* clock = Clock::Real());
  // Calls Shutdown().
  ~TableWriter();
  TableWriter(const TableWriter&) = delete;
  TableWriter& operator=(const TableWriter&) = delete;

  // Queues `update` behind the writes already queued. On OK its `done` runs exactly once, on the
  // writer's thread (or on the thread that calls Shutdown). Otherwise `done` is not called:
  // RESOURCE_EXHAUSTED (naming the limit) when max_queued writes wait already, UNAVAILABLE after
  // Shutdown().
  absl::Status Submit(Update update);

  // Swaps in another version of the whole table (prepared by the store) at the next boundary,
  // with its own sequence; returns once it serves, or why it does not. Blocks: not on a gRPC
  // thread.
  absl::Status SwapVersion(std::unique_ptr<PreparedTable> table, int64_t sequence);

  // Runs `fn` with no write in progress and none started until it returns (they wait in the
  // queue; their rows may be prepared; lookups go on), passing the last applied sequence: the
  // table then stays as it is at that sequence, for a consistent copy (SaveTable). Returns fn's
  // status.
  absl::Status WithUpdatesPaused(absl::FunctionRef<absl::Status(int64_t sequence)> fn);

  // The sequence of the last write (initial_sequence before any) and the rows updates have
  // written.
  int64_t last_sequence() const { return last_sequence_.load(std::memory_order_acquire); }
  int64_t updated_rows() const { return updated_rows_.load(std::memory_order_relaxed); }

  // Stops taking writes, answers each queued one UNAVAILABLE without starting it, and waits for
  // those the thread has taken to be written and answered. Idempotent. Call before the batcher's
  // Shutdown.
  void Shutdown();

 private:
  struct Write {
    Update update;
    std::unique_ptr<PreparedRows> prepared;  // the message's rows, once the thread prepared them
    // What Apply did, for `done` once the batches run again: the rows written, or why not.
    absl::StatusOr<int64_t> outcome = int64_t{0};
  };

  void Run();
  // Takes the next writes off the queue: the oldest, and those behind it up to
  // max_prepared_bytes of rows.
  std::deque<Write> Take() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Prepares the rows of `w` (a message); on failure answers it and returns false.
  bool Prepare(Write& w);
  // Writes `w` (prepared, or a version) and sets its outcome. At a batch boundary; Run answers
  // it once the boundary is over.
  void Apply(Write& w);

  EmbeddingStore* const store_;
  Batcher* const batcher_;
  const TableMetrics metrics_;
  const WriterOptions options_;
  Clock* const clock_;

  absl::Mutex mu_;
  std::deque<Write> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;  // the thread is at a boundary, writing
  int paused_ ABSL_GUARDED_BY(mu_) = 0;        // WithUpdatesPaused calls running
  std::atomic<int64_t> last_sequence_;         // written by the writer's thread only
  std::atomic<int64_t> updated_rows_{0};
  absl::Mutex shutdown_mu_;                  // a second Shutdown() waits for the first
  std::thread thread_ ABSL_GUARDED_BY(mu_);  // last: it runs Run() on the members above
};

}  // namespace emb::service

#endif  // EMB_SERVICE_WRITE_TABLE_WRITER_H_
