// GpuStore: a table resident in GPU memory; each LookUp is one batch through a pool of slots.
//
// The store is four parts, each in its own file of this folder: the table's upload at start-up
// (table_upload.h), the slots that batches in flight own (batch_slots.h), the completion threads
// that answer them (batch_completer.h), and this file, which enqueues a batch's work. The answer
// memory the device writes into (pinned_answer_memory.h) belongs to the device's AnswerBufferPool,
// which the server makes; a batch brings each caller's span with its device address.
//
// LookUp takes a free slot (blocking while all are busy: the batcher's back-pressure), copies the
// ids into the slot's pinned memory and enqueues copy-in, gather and copy-out on the slot's stream
// (or, for a small batch, gathers that read the ids from mapped pinned memory and write the rows
// to host memory directly), then hands the slot to the completer. Rows go straight into each
// caller's span where the device sees it (AnswerSpan::device) and it is large enough to be worth
// its own copy or launch; the other spans' rows pass through the slot's pinned buffer and are
// copied on the host. With several slots the copies and gather of one batch overlap the next.
// Where the rows live is the store's TableRows (table_rows.h), chosen once by Create: the whole
// table in GPU memory (DeviceRows), or, for a table that does not fit the device memory it may
// use, a host tier (HostTier: rows in pinned host memory, the most looked-up cached on the
// device). The rows make the kernels' view of the table, and write updates and swap versions.
// Row updates: PrepareRows converts a message's rows to the table's type on the host, into a
// pinned staging block (and on to its device memory where the rows write from there), all while
// batches run; WriteRows, at the batch boundary, hands them to the rows.
// Thread-safe: LookUp from any thread.
#ifndef EMB_SERVICE_STORE_GPU_GPU_STORE_H_
#define EMB_SERVICE_STORE_GPU_GPU_STORE_H_

#include <memory>
#include <optional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "kernels/cuda_stream.h"
#include "kernels/device_buffer.h"
#include "kernels/gather_tuning.h"
#include "kernels/lookup_problem.h"
#include "service/store/embedding_store.h"
#include "service/store/gpu/batch_completer.h"
#include "service/store/gpu/batch_slots.h"
#include "service/store/gpu/cuda_check.h"
#include "service/store/gpu/table_rows.h"
#include "service/store/load_plan.h"
#include "service/store/store_options.h"
#include "service/tables/table_source.h"

namespace emb::service {

class GpuStore final : public EmbeddingStore {
 public:
  // Copies the table onto GPU `device` (UploadTable: options.load_readers threads read chunks of
  // options.load_chunk_bytes while the copies run) and logs the upload's rates (LoadSummary);
  // makes options.inflight_batches slots and two completion threads per slot.
  // RESOURCE_EXHAUSTED (table, bytes needed, bytes free) when it does not fit; INTERNAL with the
  // CUDA error's name for other CUDA failures, or naming the file and offset of a failed read.
  static absl::StatusOr<std::unique_ptr<GpuStore>> Create(const TableSource& source, int device,
                                                          const StoreOptions& options);
  // A store over `rows` that were not loaded from a table source (a row split's staging rows,
  // DeviceRows::CreateStaging), described by `info`; slots and completion threads as Create makes
  // them.
  static absl::StatusOr<std::unique_ptr<GpuStore>> CreateOver(TableInfo info,
                                                              std::unique_ptr<TableRows> rows,
                                                              int device,
                                                              const StoreOptions& options);
  // GPU memory a store's batch buffers take besides its table (or its host tier's cache).
  static size_t BatchBufferBytes(const StoreOptions& options, int64_t dim);
  // Waits for the batches in flight, then stops the completion threads.
  ~GpuStore() override = default;

  bool asynchronous() const override { return true; }
  int max_inflight_batches() const override { return slots_->size(); }
  std::optional<CacheStats> cache_stats() const override { return rows_->cache_stats(); }
  // How the table's upload at Create went.
  const LoadStats& load_stats() const { return rows_->load_stats(); }

  using EmbeddingStore::LookUp;
  void LookUp(const LookUpBatch& batch, Done done) override;
  absl::StatusOr<std::unique_ptr<PreparedRows>> PrepareRows(
      absl::Span<const int64_t> ids, DataType rows_type, absl::Span<const std::byte> rows) override;
  absl::Status WriteRows(PreparedRows& rows) override;
  absl::Status ReadRows(size_t offset, absl::Span<std::byte> out) const override;
  // A prepared table is the version uploaded into a second device buffer (as Create uploads);
  // the swap exchanges the buffers.
  absl::StatusOr<std::unique_ptr<PreparedTable>> PrepareTable(const TableSource& source) override;
  absl::Status SwapTable(PreparedTable& table) override;

 private:
  GpuStore(TableInfo info, int device, const StoreOptions& options);
  // The slots and the completion threads.
  absl::Status MakeSlots();
  // Puts the table in a host tier whose cache takes what `budget` leaves besides the batch
  // `buffers` and the cache's slots; `why` says why the table is not on the device.
  absl::Status LoadHostTier(const TableSource& source, size_t budget, size_t buffers,
                            absl::string_view why);
  // Enqueues the batch on `slot`; an error means nothing is left in flight on it.
  absl::Status Enqueue(BatchSlot& slot, const LookUpBatch& batch);
  // Enqueues on `stream` the lookup of the `n` rows `ids` (memory the device reads), one an answer
  // row, into `out`.
  absl::Status LaunchRows(const int64_t* ids, int64_t n, void* out, DataType out_type,
                          cudaStream_t stream) const;
  // Copies the batch's bags into the slot's device memory (on its stream) and fills `bags` but
  // for its answer pointer.
  absl::Status CopyBagsIn(BatchSlot& slot, const LookUpBatch& batch, kernels::LookupProblem* bags);
  // Whether the device writes `out` itself: it sees the memory, and it is at least
  // options_.direct_answer_min_bytes.
  bool WrittenDirectly(const AnswerSpan& out) const;
  // Where one run of a batch's answer goes: a caller's span that the device writes directly
  // (`span` set), or consecutive staged spans, whose rows go to the slot's pinned buffer at
  // first_byte (`span` nullptr).
  struct Run {
    size_t first_id;    // in the batch's ids
    size_t first_byte;  // in the batch's answer
    size_t bytes;
    const AnswerSpan* span;
  };
  // Calls f(run) for each run of `outs` in order; records the staged spans in slot.staged.
  template <typename F>
  absl::Status ForEachRun(BatchSlot& slot, RowsOut outs, size_t row_bytes, F&& f) const;

  const StoreOptions options_;
  const CudaCheck check_;
  std::unique_ptr<TableRows> rows_;
  kernels::GatherTuning tuning_;  // the device's, for every lookup
  std::unique_ptr<SlotPool> slots_;
  std::unique_ptr<BatchCompleter> completer_;  // after slots_: its threads end first

  friend class GpuPreparedRows;
  // A free staging block of at least `bytes`, or a new one; blocks are kept for reuse once an
  // update is written (a few, grown to the largest message).
  absl::StatusOr<std::unique_ptr<StagingBlock>> AcquireStaging(size_t bytes);
  void ReleaseStaging(std::unique_ptr<StagingBlock> block);

  absl::Mutex staging_mu_;
  std::vector<std::unique_ptr<StagingBlock>> free_staging_ ABSL_GUARDED_BY(staging_mu_);
};

}  // namespace emb::service

#endif  // EMB_SERVICE_STORE_GPU_GPU_STORE_H_
