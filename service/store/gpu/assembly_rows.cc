#include "service/store/gpu/assembly_rows.h"

#include <cuda_runtime_api.h>

#include "absl/status/status.h"
#include "service/common/status_macros.h"

namespace emb::service {
namespace {

absl::Status NotATable(const char* what) {
  return absl::UnimplementedError(
      absl::StrCat("a row split's assembly rows are not a table: no ", what));
}

}  // namespace

absl::StatusOr<std::unique_ptr<AssemblyRows>> AssemblyRows::Create(const CudaCheck& check,
                                                                   DataType type, int64_t dim,
                                                                   int slots, int64_t slot_rows) {
  const int64_t rows = static_cast<int64_t>(slots) * slot_rows;
  auto assembly = std::unique_ptr<AssemblyRows>(new AssemblyRows(type, dim, slot_rows, rows));
  RETURN_IF_ERROR(check(cudaSetDevice(check.device()), "cudaSetDevice"));
  ASSIGN_OR_RETURN(assembly->tuning_, kernels::GetGatherTuning(check.device()));
  ASSIGN_OR_RETURN(assembly->rows_, kernels::DeviceBuffer<std::byte>::Allocate(
                                        static_cast<size_t>(rows) * RowBytes(type, dim)));
  return assembly;
}

std::byte* AssemblyRows::RowAt(int slot, int64_t row) const {
  return rows_.data() + static_cast<size_t>(slot * slot_rows_ + row) * RowBytes(type_, dim_);
}

kernels::DeviceBags AssemblyRows::Bags() const {
  kernels::DeviceBags bags;
  bags.table = rows_.data();
  bags.table_type = type_;
  bags.rows = rows_count_;
  bags.dim = dim_;
  return bags;
}

absl::Status AssemblyRows::Gather(const int64_t* ids, int64_t n, void* out, DataType out_type,
                                  cudaStream_t stream) const {
  return kernels::LaunchGather(tuning_, rows_.data(), type_, rows_count_, dim_, ids, n, out,
                               out_type, stream);
}

absl::Status AssemblyRows::Write(const StagingBlock&, int64_t, size_t) {
  return NotATable("updates");
}

absl::Status AssemblyRows::Read(size_t, absl::Span<std::byte>) const {
  return NotATable("read-back");
}

absl::StatusOr<std::unique_ptr<PreparedTable>> AssemblyRows::Prepare(const TableSource&,
                                                                     const EmbeddingStore*) const {
  return NotATable("versions");
}

absl::Status AssemblyRows::Swap(PreparedTable&, const EmbeddingStore*) {
  return NotATable("versions");
}

}  // namespace emb::service
