// DeviceRows: a GpuStore's whole table in GPU memory (TableRows, table_rows.h). Lookups gather
// with the gather kernels; an update is one scatter kernel (kernels/scatter_rows.h) from the
// staging block's device memory over the rows, on a stream of its own; a new version is uploaded
// into a second device buffer beside the served one, and the swap exchanges the buffers.
// Thread-safety: as TableRows says.
#ifndef EMB_SERVICE_STORE_GPU_DEVICE_ROWS_H_
#define EMB_SERVICE_STORE_GPU_DEVICE_ROWS_H_

#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "kernels/cuda_stream.h"
#include "kernels/device_buffer.h"
#include "kernels/lookup_problem.h"
#include "service/store/gpu/cuda_check.h"
#include "service/store/gpu/table_rows.h"
#include "service/store/store_options.h"

namespace emb::service {

class DeviceRows final : public TableRows {
 public:
  // Copies `source` onto check.device() (UploadTable: options.load_readers threads read chunks
  // of options.load_chunk_bytes while the copies run) and logs the upload's rates (LoadSummary).
  // INTERNAL with the CUDA error's name, or naming the file and offset of a failed read.
  static absl::StatusOr<std::unique_ptr<DeviceRows>> Create(const TableSource& source,
                                                            const CudaCheck& check,
                                                            const StoreOptions& options);
  // `rows` rows of `dim` elements of `type`, uninitialized: staging rows that others write (a row
  // split's assembly, store_factory's RowAssemblyOn), through row_at.
  static absl::StatusOr<std::unique_ptr<DeviceRows>> CreateStaging(const CudaCheck& check,
                                                                   const StoreOptions& options,
                                                                   DataType type, int64_t rows,
                                                                   int64_t dim);
  // Row `row` in device memory.
  std::byte* row_at(int64_t row) const {
    return table_.data() + static_cast<size_t>(row) * RowBytes(type_, dim_);
  }
  size_t bytes() const { return table_.size(); }

  kernels::LookupProblem Table() const override;
  bool writes_from_device() const override { return true; }
  absl::Status Write(const StagingBlock& block, int64_t count, size_t rows_offset) override;
  absl::Status Read(size_t offset, absl::Span<std::byte> out) const override;
  // FAILED_PRECONDITION when the device has no room for a second copy of the rows.
  absl::StatusOr<std::unique_ptr<PreparedTable>> Prepare(
      const TableSource& source, const EmbeddingStore* maker) const override;
  absl::Status Swap(PreparedTable& table, const EmbeddingStore* maker) override;
  const LoadStats& load_stats() const override { return load_stats_; }

 private:
  DeviceRows(const CudaCheck& check, const StoreOptions& options, DataType type, int64_t rows,
             int64_t dim);
  // A device buffer of `source`'s rows.
  absl::StatusOr<kernels::DeviceBuffer<std::byte>> Upload(const TableSource& source,
                                                          LoadStats* stats) const;

  const CudaCheck check_;
  const StoreOptions options_;
  const DataType type_;
  const int64_t rows_;
  const int64_t dim_;
  kernels::DeviceBuffer<std::byte> table_;  // replaced only by Swap, with lookups kept away
  LoadStats load_stats_;
  absl::Mutex write_mu_;
  kernels::CudaStream write_stream_ ABSL_GUARDED_BY(write_mu_);  // made by the first Write
};

}  // namespace emb::service

#endif  // EMB_SERVICE_STORE_GPU_DEVICE_ROWS_H_
