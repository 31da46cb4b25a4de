// LaunchCopyRows and LaunchScatterRows (scatter_rows.h): one kernel per unit width, a
// grid-stride loop over the units of every row. Updates and cache fills are rare and small next
// to lookups (thousands of rows), so the kernel is plain: one row's units per run of threads.
#include <algorithm>
#include <cstdint>

#include "kernels/cuda_status.h"
#include "kernels/scatter_rows.h"

namespace emb::kernels {
namespace {

struct alignas(16) Unit16 {
  uint4 v;
};

template <typename Unit>
__global__ void CopyRowsKernel(std::byte* __restrict__ dst, const int64_t* __restrict__ dst_ids,
                               const std::byte* __restrict__ src,
                               const int64_t* __restrict__ src_ids, int64_t units_per_row,
                               int64_t total_units) {
  auto* out = reinterpret_cast<Unit*>(dst);
  const auto* in = reinterpret_cast<const Unit*>(src);
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t u = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; u < total_units;
       u += stride) {
    const int64_t i = u / units_per_row;
    const int64_t j = u - i * units_per_row;
    const int64_t from = src_ids != nullptr ? src_ids[i] : i;
    const int64_t to = dst_ids != nullptr ? dst_ids[i] : i;
    out[to * units_per_row + j] = in[from * units_per_row + j];
  }
}

template <typename Unit>
cudaError_t Launch(std::byte* dst, const int64_t* dst_ids, const std::byte* src,
                   const int64_t* src_ids, size_t row_bytes, int64_t num_rows,
                   cudaStream_t stream) {
  constexpr int kThreads = 256;
  constexpr int64_t kMaxBlocks = 4096;  // enough to fill the H200 many times over
  const auto units_per_row = static_cast<int64_t>(row_bytes / sizeof(Unit));
  const int64_t total = units_per_row * num_rows;
  const int64_t blocks = std::min<int64_t>((total + kThreads - 1) / kThreads, kMaxBlocks);
  CopyRowsKernel<Unit><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
      dst, dst_ids, src, src_ids, units_per_row, total);
  return cudaGetLastError();
}

bool Aligned(const void* p, size_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

}  // namespace

absl::Status LaunchCopyRows(std::byte* dst, const int64_t* dst_ids, const std::byte* src,
                            const int64_t* src_ids, size_t row_bytes, int64_t num_rows,
                            cudaStream_t stream) {
  if (row_bytes == 0 || num_rows < 0) {
    return absl::InvalidArgumentError(
        "LaunchCopyRows: row_bytes must be positive, num_rows not negative");
  }
  if (num_rows == 0) {
    return absl::OkStatus();
  }
  auto fits = [&](size_t unit) {
    return row_bytes % unit == 0 && Aligned(dst, unit) && Aligned(src, unit);
  };
  cudaError_t e;
  if (fits(16)) {
    e = Launch<Unit16>(dst, dst_ids, src, src_ids, row_bytes, num_rows, stream);
  } else if (fits(8)) {
    e = Launch<uint64_t>(dst, dst_ids, src, src_ids, row_bytes, num_rows, stream);
  } else if (fits(4)) {
    e = Launch<uint32_t>(dst, dst_ids, src, src_ids, row_bytes, num_rows, stream);
  } else if (fits(2)) {
    e = Launch<uint16_t>(dst, dst_ids, src, src_ids, row_bytes, num_rows, stream);
  } else {  // quantized rows of an odd size (int4 of an odd dim)
    e = Launch<uint8_t>(dst, dst_ids, src, src_ids, row_bytes, num_rows, stream);
  }
  EMB_CUDA_RETURN_IF_ERROR(e, "launch CopyRowsKernel");
  return absl::OkStatus();
}

absl::Status LaunchScatterRows(std::byte* table, size_t row_bytes, const int64_t* ids,
                               const std::byte* rows, int64_t num_ids, cudaStream_t stream) {
  return LaunchCopyRows(table, ids, rows, nullptr, row_bytes, num_ids, stream);
}

}  // namespace emb::kernels
