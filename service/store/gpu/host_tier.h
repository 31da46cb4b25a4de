// HostTier: a GPU store's table kept in pinned host memory that the GPU maps, with a cache of its
// most looked-up rows in GPU memory; for a table larger than the GPU memory it may use.
//
// Lookups read each row from the cache or, through the mapping, from host memory (one kernel:
// kernels::CachedRows). A manager thread, off the lookup path, counts a sample of each batch's ids
// (BeginBatch hands them over without waiting) and moves rows in and out of the cache as
// RowCachePolicy plans: it first hides the rows it evicts (their slots read -1), waits until
// every batch that began before that has ended (InFlightBatches), then copies the admitted rows
// into the freed slots and only then shows them. So no lookup ever reads a slot that is being
// rewritten.
//
// Updates write the host rows and, for the rows cached, their slots, under the cache's lock: a
// row being admitted is either copied after the update, or rewritten by it. A new version is read
// into pinned host memory beside the served rows; the swap serves it and empties the cache, which
// the manager refills.
// Thread-safety: as TableRows (table_rows.h) says.
#ifndef EMB_SERVICE_STORE_GPU_HOST_TIER_H_
#define EMB_SERVICE_STORE_GPU_HOST_TIER_H_

#include <cuda_runtime_api.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "kernels/cuda_stream.h"
#include "kernels/device_buffer.h"
#include "kernels/lookup_problem.h"
#include "service/store/cache/in_flight_batches.h"
#include "service/store/cache/row_cache_policy.h"
#include "service/store/embedding_store.h"
#include "service/store/gpu/cuda_check.h"
#include "service/store/gpu/table_rows.h"
#include "service/store/load_plan.h"
#include "service/store/store_options.h"
#include "service/tables/host_rows.h"
#include "service/tables/table_source.h"

namespace emb::service {

// A table's rows in huge-page host memory, pinned and mapped into the GPU's address space.
class PinnedHostRows {
 public:
  // Reads `source` (ReadTable, options.load_readers threads) and pins the rows.
  // RESOURCE_EXHAUSTED when the host memory cannot be had or pinned; a read's errors.
  static absl::StatusOr<std::unique_ptr<PinnedHostRows>> Read(const TableSource& source,
                                                              const CudaCheck& check,
                                                              const StoreOptions& options,
                                                              LoadStats* stats);
  ~PinnedHostRows();

  std::byte* host() { return rows_->mutable_data(); }
  const std::byte* host() const { return rows_->data(); }
  // The same memory as the GPU addresses it.
  const std::byte* device() const { return device_; }
  size_t bytes() const { return bytes_; }

 private:
  PinnedHostRows(std::unique_ptr<HugePageRows> rows, size_t bytes)
      : rows_(std::move(rows)), bytes_(bytes) {}
  std::unique_ptr<HugePageRows> rows_;
  size_t bytes_;
  bool registered_ = false;
  const std::byte* device_ = nullptr;
};

class HostTier final : public TableRows {
 public:
  struct Options {
    // Rows the GPU cache holds; 0: none (every row read from host memory).
    int64_t cache_rows = 0;
    // Ids of a batch handed to the manager, at most (evenly spaced over the batch).
    size_t samples_per_batch = 16384;
    // Rows the manager moves into the cache in one step, at most.
    size_t max_changes = 16384;
    // Rows put into the cache at start-up, hottest first (as far as they fit).
    std::vector<int64_t> hot_ids;
  };

  // Reads `source` into pinned host memory, makes the cache (options.cache_rows rows and a slot
  // per row of the table) on check.device() and starts the manager. RESOURCE_EXHAUSTED for memory
  // that cannot be had; INTERNAL for CUDA errors.
  static absl::StatusOr<std::unique_ptr<HostTier>> Create(const TableSource& source,
                                                          const CudaCheck& check,
                                                          const Options& options,
                                                          const StoreOptions& store_options);
  // Stops the manager (waiting for its step in progress).
  ~HostTier() override;

  // GPU memory the cache of `cache_rows` rows takes for a table of `rows` rows of `row_bytes`.
  static size_t DeviceBytes(int64_t rows, int64_t cache_rows, size_t row_bytes);

  // The host rows as the GPU addresses them, and the cache (kernels::CachedRows): every lookup
  // reads each row where it is.
  kernels::LookupProblem Table() const override;
  // Samples the batch's ids for the manager (never waiting for it); the batch's slots stay as
  // they are until its done runs.
  EmbeddingStore::Done Track(absl::Span<const int64_t> ids, EmbeddingStore::Done done) override;

  // Updates are written from the staging block's host memory, into host memory and the cache.
  bool writes_from_device() const override { return false; }
  absl::Status Write(const StagingBlock& block, int64_t count, size_t rows_offset) override;
  absl::Status Read(size_t offset, absl::Span<std::byte> out) const override;
  absl::StatusOr<std::unique_ptr<PreparedTable>> Prepare(
      const TableSource& source, const EmbeddingStore* maker) const override;
  // Fails only on a CUDA failure emptying the cache, which the CudaCheck has reported.
  absl::Status Swap(PreparedTable& table, const EmbeddingStore* maker) override;

  std::optional<CacheStats> cache_stats() const override { return stats(); }
  const LoadStats& load_stats() const override { return load_stats_; }

 private:
  HostTier(const TableSource& source, const CudaCheck& check, const Options& options,
           const StoreOptions& store_options);
  kernels::CachedRows cached() const;
  CacheStats stats() const;
  // Around each batch (Track): BeginBatch before its kernels are enqueued, EndBatch with its
  // ticket once they are done.
  uint64_t BeginBatch(absl::Span<const int64_t> ids);
  void EndBatch(uint64_t ticket, size_t ids);
  // Writes rows (in the table's type, host memory) over rows `ids`, in host memory and the cache.
  absl::Status WriteRows(absl::Span<const int64_t> ids, const std::byte* rows);
  void Manage();
  // Moves the planned rows in and out of the cache; see the file comment.
  absl::Status Apply(const std::vector<RowCachePolicy::Change>& changes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(cache_mu_);
  // Copies host rows `ids` into cache slots `slots` and shows them (slots[id] = slot).
  absl::Status Fill(size_t n) ABSL_EXCLUSIVE_LOCKS_REQUIRED(cache_mu_);

  const CudaCheck check_;
  const Options options_;
  const StoreOptions store_options_;
  const DataType type_;
  const int64_t table_rows_;
  const int64_t dim_;
  const size_t row_bytes_;
  std::unique_ptr<PinnedHostRows> rows_;  // replaced only by Swap, with lookups kept away
  LoadStats load_stats_;
  kernels::DeviceBuffer<std::byte> cache_;
  kernels::DeviceBuffer<int32_t> slots_;
  kernels::DeviceBuffer<unsigned long long> misses_;
  InFlightBatches in_flight_;
  std::atomic<int64_t> lookups_{0};

  // The manager's: the policy, its stream and mapped staging for the ids and slots it changes.
  mutable absl::Mutex cache_mu_;
  RowCachePolicy policy_ ABSL_GUARDED_BY(cache_mu_);
  kernels::CudaStream stream_ ABSL_GUARDED_BY(cache_mu_);
  kernels::PinnedBuffer<int64_t> staged_ids_ ABSL_GUARDED_BY(cache_mu_);
  kernels::PinnedBuffer<int64_t> staged_slots_ ABSL_GUARDED_BY(cache_mu_);
  kernels::PinnedBuffer<int32_t> staged_values_ ABSL_GUARDED_BY(cache_mu_);

  // Sampled ids on their way to the manager.
  absl::Mutex intake_mu_;
  std::vector<int64_t> intake_ ABSL_GUARDED_BY(intake_mu_);
  bool stop_ ABSL_GUARDED_BY(intake_mu_) = false;
  std::thread manager_;
};

}  // namespace emb::service

#endif  // EMB_SERVICE_STORE_GPU_HOST_TIER_H_
