// LaunchScatterRows (scatter_rows.h): one kernel per unit width, a grid-stride loop over the
// units of every row. Updates are rare and small next to lookups (a message of thousands of
// rows), so the kernel is plain: coalesced reads of the message, one row's units per run of
// threads.
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
__global__ void ScatterRowsKernel(std::byte* __restrict__ table, int64_t units_per_row,
                                  const int64_t* __restrict__ ids,
                                  const std::byte* __restrict__ rows, int64_t total_units) {
  auto* out = reinterpret_cast<Unit*>(table);
  const auto* in = reinterpret_cast<const Unit*>(rows);
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t u = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; u < total_units;
       u += stride) {
    const int64_t i = u / units_per_row;
    const int64_t j = u - i * units_per_row;
    out[ids[i] * units_per_row + j] = in[u];
  }
}

template <typename Unit>
cudaError_t Launch(std::byte* table, size_t row_bytes, const int64_t* ids, const std::byte* rows,
                   int64_t num_ids, cudaStream_t stream) {
  constexpr int kThreads = 256;
  constexpr int64_t kMaxBlocks = 4096;  // enough to fill the H200 many times over
  const auto units_per_row = static_cast<int64_t>(row_bytes / sizeof(Unit));
  const int64_t total = units_per_row * num_ids;
  const int64_t blocks = std::min<int64_t>((total + kThreads - 1) / kThreads, kMaxBlocks);
  ScatterRowsKernel<Unit><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
      table, units_per_row, ids, rows, total);
  return cudaGetLastError();
}

bool Aligned(const void* p, size_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

}  // namespace

absl::Status LaunchScatterRows(std::byte* table, size_t row_bytes, const int64_t* ids,
                               const std::byte* rows, int64_t num_ids, cudaStream_t stream) {
  if (row_bytes == 0 || num_ids < 0) {
    return absl::InvalidArgumentError(
        "LaunchScatterRows: row_bytes must be positive, num_ids not negative");
  }
  if (num_ids == 0) {
    return absl::OkStatus();
  }
  auto fits = [&](size_t unit) {
    return row_bytes % unit == 0 && Aligned(table, unit) && Aligned(rows, unit);
  };
  cudaError_t e;
  if (fits(16)) {
    e = Launch<Unit16>(table, row_bytes, ids, rows, num_ids, stream);
  } else if (fits(8)) {
    e = Launch<uint64_t>(table, row_bytes, ids, rows, num_ids, stream);
  } else if (fits(4)) {
    e = Launch<uint32_t>(table, row_bytes, ids, rows, num_ids, stream);
  } else if (fits(2)) {
    e = Launch<uint16_t>(table, row_bytes, ids, rows, num_ids, stream);
  } else {  // quantized rows of an odd size (int4 of an odd dim)
    e = Launch<uint8_t>(table, row_bytes, ids, rows, num_ids, stream);
  }
  EMB_CUDA_RETURN_IF_ERROR(e, "launch ScatterRowsKernel");
  return absl::OkStatus();
}

}  // namespace emb::kernels
