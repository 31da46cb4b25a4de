#include "service/store/gpu/device_rows.h"

#include <cuda_runtime_api.h>

#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "kernels/scatter_rows.h"
#include "service/common/log.h"
#include "service/common/status_macros.h"
#include "service/store/gpu/table_upload.h"

namespace emb::service {
namespace {

// The next version's rows, in device memory.
using DevicePreparedTable = PreparedTableOf<kernels::DeviceBuffer<std::byte>>;

}  // namespace

DeviceRows::DeviceRows(const CudaCheck& check, const StoreOptions& options, DataType type,
                       int64_t rows, int64_t dim)
    : check_(check), options_(options), type_(type), rows_(rows), dim_(dim) {}

absl::StatusOr<std::unique_ptr<DeviceRows>> DeviceRows::CreateStaging(const CudaCheck& check,
                                                                      const StoreOptions& options,
                                                                      DataType type, int64_t rows,
                                                                      int64_t dim) {
  auto staging = std::unique_ptr<DeviceRows>(new DeviceRows(check, options, type, rows, dim));
  RETURN_IF_ERROR(check(cudaSetDevice(check.device()), "cudaSetDevice"));
  ASSIGN_OR_RETURN(staging->table_, kernels::DeviceBuffer<std::byte>::Allocate(
                                        static_cast<size_t>(rows) * RowBytes(type, dim)));
  return staging;
}

absl::StatusOr<std::unique_ptr<DeviceRows>> DeviceRows::Create(const TableSource& source,
                                                               const CudaCheck& check,
                                                               const StoreOptions& options) {
  auto rows = std::unique_ptr<DeviceRows>(
      new DeviceRows(check, options, source.dtype(), source.rows(), source.dim()));
  const absl::Time start = options.clock->Now();
  ASSIGN_OR_RETURN(rows->table_, rows->Upload(source, &rows->load_stats_));
  rows->load_stats_.seconds = SecondsSince(options.clock, start);
  LogInfo(LoadSummary(source.name(), rows->load_stats_));
  return rows;
}

absl::StatusOr<kernels::DeviceBuffer<std::byte>> DeviceRows::Upload(const TableSource& source,
                                                                    LoadStats* stats) const {
  const LoadPlan plan = PlanLoad(source.bytes(), options_.load_readers, options_.load_chunk_bytes,
                                 std::thread::hardware_concurrency());
  ASSIGN_OR_RETURN(auto table, kernels::DeviceBuffer<std::byte>::Allocate(source.bytes()));
  ASSIGN_OR_RETURN(*stats, UploadTable(source, plan, table.data(), check_, options_.clock));
  return table;
}

kernels::LookupProblem DeviceRows::Table() const {
  kernels::LookupProblem table;
  table.table = table_.data();
  table.table_type = type_;
  table.rows = rows_;
  table.dim = dim_;
  return table;
}

absl::Status DeviceRows::Write(const StagingBlock& block, int64_t count, size_t rows_offset) {
  absl::MutexLock lock(&write_mu_);
  RETURN_IF_ERROR(check_(cudaSetDevice(check_.device()), "cudaSetDevice"));
  if (write_stream_.get() == nullptr) {
    ASSIGN_OR_RETURN(write_stream_, kernels::CudaStream::Create());
  }
  RETURN_IF_ERROR(kernels::LaunchScatterRows(
      table_.data(), RowBytes(type_, dim_), reinterpret_cast<const int64_t*>(block.device.data()),
      block.device.data() + rows_offset, count, write_stream_.get()));
  // Written before the first lookup after this one is enqueued (the batcher starts none until
  // this returns), so every later gather reads the new rows.
  return check_(cudaStreamSynchronize(write_stream_.get()), "write updated rows");
}

absl::Status DeviceRows::Read(size_t offset, absl::Span<std::byte> out) const {
  RETURN_IF_ERROR(check_(cudaSetDevice(check_.device()), "cudaSetDevice"));
  // A synchronous copy on the legacy stream, which the batches' non-blocking streams do not wait
  // for: lookups go on while a table is read back.
  return check_(cudaMemcpy(out.data(), table_.data() + offset, out.size(), cudaMemcpyDeviceToHost),
                "copy the table to the host");
}

absl::StatusOr<std::unique_ptr<PreparedTable>> DeviceRows::Prepare(
    const TableSource& source, const EmbeddingStore* maker) const {
  RETURN_IF_ERROR(check_(cudaSetDevice(check_.device()), "cudaSetDevice"));
  size_t free_bytes = 0;
  size_t total_bytes = 0;
  RETURN_IF_ERROR(check_(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo"));
  if (source.bytes() > free_bytes) {
    return absl::FailedPreconditionError(absl::StrCat(
        "loading ", source.origin(), " beside the served table needs ", source.bytes(),
        " bytes on ", check_.device_name(), " but ", free_bytes, " of ", total_bytes,
        " are free; the served version stays (a version that does not fit twice needs a "
        "restart, or a device with room for both)"));
  }
  LoadStats stats;
  ASSIGN_OR_RETURN(auto table, Upload(source, &stats));
  return std::make_unique<DevicePreparedTable>(maker, std::move(table));
}

absl::Status DeviceRows::Swap(PreparedTable& table, const EmbeddingStore* maker) {
  std::swap(table_, MadeBy<DevicePreparedTable>(maker, table)->rows);
  return absl::OkStatus();
}

}  // namespace emb::service
