// TableRows: where a GpuStore's rows live, and everything that depends on it: the view a batch's
// kernels read, how a batch is followed while it reads, row updates, the read-back, and a new
// version's preparation and swap. Two kinds: DeviceRows (device_rows.h), the whole table in GPU
// memory, and HostTier (host_tier.h), the rows in pinned host memory with a GPU cache of the
// most looked-up ones. The GpuStore (gpu_store.h) keeps the slots, the enqueue and the
// completion, and chooses the kind once, when it is created.
// Thread-safety: Table, Track, Read and the const members from any thread; Write and Swap
// with lookups kept away (the batcher's boundary), one at a time.
#ifndef EMB_SERVICE_STORE_GPU_TABLE_ROWS_H_
#define EMB_SERVICE_STORE_GPU_TABLE_ROWS_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "kernels/cuda_stream.h"
#include "kernels/data_type.h"
#include "kernels/device_buffer.h"
#include "kernels/lookup_problem.h"
#include "service/store/embedding_store.h"
#include "service/store/load_plan.h"
#include "service/tables/table_source.h"

namespace emb::service {

// Pinned and device memory an update's rows pass through, with the stream that copies them: the
// ids at offset 0, the rows (in the table's type) at a later offset.
struct StagingBlock {
  kernels::PinnedBuffer<std::byte> host;
  kernels::DeviceBuffer<std::byte> device;
  kernels::CudaStream stream;
};

class TableRows {
 public:
  virtual ~TableRows() = default;

  // The table's part of every lookup launch (kernels/lookup.h): its rows as the GPU addresses
  // them, their type and shape, and the cache where there is one.
  virtual kernels::LookupProblem Table() const = 0;
  // Called as a batch of `ids` is enqueued, before its kernels; returns what to call when it is
  // done, which may first note that the batch no longer reads the rows.
  virtual EmbeddingStore::Done Track(absl::Span<const int64_t> ids, EmbeddingStore::Done done) {
    (void)ids;
    return done;
  }

  // Whether an update's staged rows go to the staging block's device memory before Write (else
  // Write reads them from its host memory).
  virtual bool writes_from_device() const = 0;
  // Writes `count` staged rows (ids distinct and in range) over the table's rows; returns once
  // every later lookup reads them.
  virtual absl::Status Write(const StagingBlock& block, int64_t count, size_t rows_offset) = 0;
  // Copies table bytes [offset, offset + out.size()) (checked by the caller).
  virtual absl::Status Read(size_t offset, absl::Span<std::byte> out) const = 0;

  // The rows of `source` (a version of the same shape), read beside the served ones; `maker` is
  // the store that will swap them in.
  virtual absl::StatusOr<std::unique_ptr<PreparedTable>> Prepare(
      const TableSource& source, const EmbeddingStore* maker) const = 0;
  // Serves the rows `table` holds (one Prepare made for `maker`).
  virtual absl::Status Swap(PreparedTable& table, const EmbeddingStore* maker) = 0;

  // The cache's counts, for rows that have one.
  virtual std::optional<CacheStats> cache_stats() const { return std::nullopt; }
  // How the rows were loaded.
  virtual const LoadStats& load_stats() const = 0;
};

}  // namespace emb::service

#endif  // EMB_SERVICE_STORE_GPU_TABLE_ROWS_H_
