// GatherSliceOwnersKernel: the gather for small tables of long rows, by column slices.
// Private to kernels/; gather/slice_owners_launch.cu launches it.
#ifndef EMB_KERNELS_GATHER_SLICE_OWNERS_KERNEL_CUH_
#define EMB_KERNELS_GATHER_SLICE_OWNERS_KERNEL_CUH_

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/gather/units_kernel.cuh"

namespace emb::kernels::gather {

// Bytes of each row that one block owns (a whole L2 line), threads per block, and the threads
// that share one answer row's slice (16 bytes each).
inline constexpr int kSliceBytes = 128;
inline constexpr int kSliceThreads = 1024;
inline constexpr int kSliceLanes = kSliceBytes / 16;
// Answer rows one block writes per step.
inline constexpr int kSliceRowsPerStep = kSliceThreads / kSliceLanes;

// The launch-time constants of GatherSliceOwnersKernel.
struct SliceOwnersArgs {
  int64_t num_ids;
  int64_t row_bytes;  // a multiple of kSliceBytes
  int64_t held_rows;  // table rows [0, held_rows) have their slices in shared memory
  uint32_t flags;     // kStreamingStores | kTableEvictLast
};

// Copies 16 bytes from global to shared memory asynchronously (cp.async, sm_80 and later; no
// registers held while it is in flight), as part of the calling thread's current group.
__device__ __forceinline__ void CopyToShared(uint4* s_dst, const void* d_src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(
                   static_cast<uint32_t>(__cvta_generic_to_shared(s_dst))),
               "l"(d_src)
               : "memory");
}

// One step of GatherSliceOwnersKernel for one thread: the slices of answer rows first + k * step
// (k < kRows) that exist, from shared memory for ids below `held`, else from the table.
template <int kRows>
__device__ __forceinline__ void WriteSliceStep(const uint8_t* __restrict__ d_table,
                                               const int64_t* __restrict__ d_ids,
                                               const SliceOwnersArgs& args, const uint4* s_slices,
                                               int64_t held, int64_t first, int64_t step,
                                               int64_t column, int lane, bool streaming,
                                               bool evict_last, uint64_t policy,
                                               uint8_t* __restrict__ d_out) {
  int64_t id[kRows];
#pragma unroll
  for (int k = 0; k < kRows; ++k) {
    const int64_t r = first + k * step;
    id[k] = r < args.num_ids ? __ldg(d_ids + r) : -1;
  }
  uint4 v[kRows];
#pragma unroll
  for (int k = 0; k < kRows; ++k) {
    if (id[k] >= 0 && id[k] < held) {
      v[k] = s_slices[id[k] * kSliceLanes + lane];
    } else if (id[k] >= 0) {
      v[k] = LoadTable(reinterpret_cast<const uint4*>(d_table + id[k] * args.row_bytes + column),
                       evict_last, policy);
    }
  }
#pragma unroll
  for (int k = 0; k < kRows; ++k) {
    if (id[k] >= 0) {
      StoreAnswer(reinterpret_cast<uint4*>(d_out + (first + k * step) * args.row_bytes + column),
                  v[k], streaming);
    }
  }
}

// Gathers by column slice: block (c, h) owns bytes [c * 128, c * 128 + 128) of every row. It
// copies that slice of table rows [0, held_rows) into shared memory (held_rows * 128 bytes, all
// of it in flight at once), then writes the slice of answer rows h * 128 + j, stepping by
// gridDim.y * 128 rows, 8 threads per row and kRows rows in flight per thread: from shared memory
// when the id is held, else from the table (in L2, when the table fits it).
//
// Every block writes the same number of bytes whatever the ids, so the grid finishes evenly
// (the row-owners kernel's blocks do not: docs/benchmarks.md §1); the grid sweeps the answer
// front to back in whole 128-byte lines; and a held row is read from memory once per block, not
// once per use.
//
// Preconditions (checked on the host): sm_80 or later; row_bytes a multiple of 128; d_table and
// d_out 16-byte aligned; dynamic shared memory of held_rows * 128 bytes; ids in [0, num_rows);
// the answer overlaps neither the table nor the ids.
template <int kRows>
__global__ void __launch_bounds__(kSliceThreads, 1)
    GatherSliceOwnersKernel(const uint8_t* __restrict__ d_table, const int64_t* __restrict__ d_ids,
                            SliceOwnersArgs args, uint8_t* __restrict__ d_out) {
  extern __shared__ __align__(128) uint4 s_slices[];
  const int lane = static_cast<int>(threadIdx.x) % kSliceLanes;
  const int64_t column = int64_t{blockIdx.x} * kSliceBytes + lane * 16;

  // Unit i of the held slices is row i / 8, piece i % 8 == lane (1024 is a multiple of 8).
  const int64_t held_units = args.held_rows * kSliceLanes;
  for (int64_t i = threadIdx.x; i < held_units; i += kSliceThreads) {
    CopyToShared(&s_slices[i], d_table + (i / kSliceLanes) * args.row_bytes + column);
  }
  asm volatile("cp.async.commit_group;" ::: "memory");

  const bool streaming = (args.flags & kStreamingStores) != 0;
  const bool evict_last = (args.flags & kTableEvictLast) != 0;
  uint64_t policy = 0;
  if (evict_last) {
    asm("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(policy));
  }
  const int64_t step = int64_t{gridDim.y} * kSliceRowsPerStep;
  asm volatile("cp.async.wait_all;" ::: "memory");
  __syncthreads();
  for (int64_t first = int64_t{blockIdx.y} * kSliceRowsPerStep + threadIdx.x / kSliceLanes;
       first < args.num_ids; first += kRows * step) {
    WriteSliceStep<kRows>(d_table, d_ids, args, s_slices, args.held_rows, first, step, column, lane,
                          streaming, evict_last, policy, d_out);
  }
}

}  // namespace emb::kernels::gather

#endif  // EMB_KERNELS_GATHER_SLICE_OWNERS_KERNEL_CUH_
