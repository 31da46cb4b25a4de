// AssemblyRows: the rows a row split's answers are put together from on a GPU (TableRows,
// table_rows.h), so that a table split over devices answers as one device does, its rows never
// rearranged on the host. They are `slots` blocks of `slot_rows` rows of one type, uninitialized:
// a batch takes a block, each part of the table copies its rows into its stretch of it (from its
// own device: AnswerSpan::OnDevice), and a gather over the block (ids: where each answer row is
// in it) puts the rows in the callers' order and pools their bags, as a GpuStore over these rows
// does for any table (MultiDeviceStore, store_factory's CreateRowAssembly).
// Nothing writes them through the store: updates, read-back and versions are UNIMPLEMENTED.
// Thread-safety: as TableRows says.
#ifndef EMB_SERVICE_STORE_GPU_ASSEMBLY_ROWS_H_
#define EMB_SERVICE_STORE_GPU_ASSEMBLY_ROWS_H_

#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "kernels/device_buffer.h"
#include "kernels/embedding_lookup.h"
#include "service/store/gpu/cuda_check.h"
#include "service/store/gpu/table_rows.h"

namespace emb::service {

class AssemblyRows final : public TableRows {
 public:
  // slots x slot_rows rows of `dim` elements of `type` (an answer type) on check.device().
  static absl::StatusOr<std::unique_ptr<AssemblyRows>> Create(const CudaCheck& check, DataType type,
                                                              int64_t dim, int slots,
                                                              int64_t slot_rows);

  // Where block `slot`'s row `row` is, in device memory.
  std::byte* RowAt(int slot, int64_t row) const;
  size_t bytes() const { return rows_.size(); }

  kernels::DeviceBags Bags() const override;
  absl::Status Gather(const int64_t* ids, int64_t n, void* out, DataType out_type,
                      cudaStream_t stream) const override;
  bool writes_from_device() const override { return true; }
  absl::Status Write(const StagingBlock& block, int64_t count, size_t rows_offset) override;
  absl::Status Read(size_t offset, absl::Span<std::byte> out) const override;
  absl::StatusOr<std::unique_ptr<PreparedTable>> Prepare(
      const TableSource& source, const EmbeddingStore* maker) const override;
  absl::Status Swap(PreparedTable& table, const EmbeddingStore* maker) override;
  const LoadStats& load_stats() const override { return load_stats_; }

 private:
  AssemblyRows(DataType type, int64_t dim, int64_t slot_rows, int64_t rows)
      : type_(type), dim_(dim), slot_rows_(slot_rows), rows_count_(rows) {}

  const DataType type_;
  const int64_t dim_;
  const int64_t slot_rows_;
  const int64_t rows_count_;
  kernels::GatherTuning tuning_;
  kernels::DeviceBuffer<std::byte> rows_;
  const LoadStats load_stats_;  // none: nothing is loaded
};

}  // namespace emb::service

#endif  // EMB_SERVICE_STORE_GPU_ASSEMBLY_ROWS_H_
