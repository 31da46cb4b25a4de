// GatherRowOwnersKernel: the gather for small tables of long rows that the ids use many times.
// Private to kernels/; gather/row_owners_launch.cu launches it.
#ifndef EMB_KERNELS_GATHER_ROW_OWNERS_KERNEL_CUH_
#define EMB_KERNELS_GATHER_ROW_OWNERS_KERNEL_CUH_

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/gather/copy_engine.cuh"
#include "kernels/gather/units_kernel.cuh"

namespace emb::kernels::gather {

// Threads per block of the row-owners kernel, and id loads in flight per thread while it scans.
inline constexpr int kOwnerThreads = 256;
inline constexpr int kOwnerIdsPerThread = 16;

// The launch-time constants of GatherRowOwnersKernel.
struct RowOwnersArgs {
  int64_t num_rows;
  int64_t num_ids;
  int64_t ids_per_slice;    // ids scanned by each block
  uint32_t row_bytes;       // a multiple of 16
  uint32_t rows_per_group;  // table rows held by each block
  uint32_t flags;           // kStreamingStores | kTableEvictLast
};

// Gathers by table row instead of by answer row, for small tables whose rows repeat in the
// answer: block (g, s) copies table rows [g * rows_per_group, ...) into shared memory once (bulk
// loads completing on one mbarrier) while its threads scan ids [s * ids_per_slice, ...) (16 loads
// in flight per thread); each id that falls in the block's rows gets the row written to its place
// in the answer by one bulk store from shared memory, issued by the thread that found it. So each
// table row is read from memory once per id slice, not once per use, and the answer is written
// in whole rows.
//
// Preconditions (checked on the host): sm_90 or later; dynamic shared memory of rows_per_group *
// row_bytes; d_table, d_out 16-byte aligned; ids in [0, num_rows); the answer overlaps neither
// the table nor the ids.
__global__ void __launch_bounds__(kOwnerThreads)
    GatherRowOwnersKernel(const uint8_t* __restrict__ d_table, const int64_t* __restrict__ d_ids,
                          RowOwnersArgs args, uint8_t* __restrict__ d_out) {
#if defined(EMB_GATHER_BULK_COPIES)
  extern __shared__ __align__(128) uint8_t s_rows[];
  __shared__ uint64_t s_loaded;
  const int64_t row_lo = static_cast<int64_t>(blockIdx.x) * args.rows_per_group;
  const uint64_t rows =
      static_cast<uint64_t>(min(static_cast<int64_t>(args.rows_per_group), args.num_rows - row_lo));
  if (threadIdx.x == 0) {
    const bool evict_last = (args.flags & kTableEvictLast) != 0;
    const uint64_t policy = evict_last ? EvictLastPolicy() : 0;
    InitBarrier(&s_loaded);
    ExpectBytes(&s_loaded, static_cast<uint32_t>(rows * args.row_bytes));
    for (uint64_t r = 0; r < rows; ++r) {
      BulkLoad(s_rows + r * args.row_bytes, d_table + (row_lo + r) * args.row_bytes, args.row_bytes,
               &s_loaded, evict_last, policy);
    }
  }
  __syncthreads();  // the barrier is initialized before anyone waits on it

  const bool evict_first = (args.flags & kStreamingStores) != 0;
  const uint64_t store_policy = evict_first ? EvictFirstPolicy() : 0;
  const int64_t id_lo = static_cast<int64_t>(blockIdx.y) * args.ids_per_slice;
  const int64_t id_hi = min(id_lo + args.ids_per_slice, args.num_ids);
  bool loaded = false;
  constexpr int64_t kStep = int64_t{kOwnerThreads} * kOwnerIdsPerThread;
  for (int64_t base = id_lo + threadIdx.x; base < id_hi; base += kStep) {
    int64_t id[kOwnerIdsPerThread];
#pragma unroll
    for (int k = 0; k < kOwnerIdsPerThread; ++k) {
      const int64_t i = base + k * kOwnerThreads;
      id[k] = i < id_hi ? __ldg(d_ids + i) : -1;
    }
#pragma unroll
    for (int k = 0; k < kOwnerIdsPerThread; ++k) {
      const uint64_t r = static_cast<uint64_t>(id[k] - row_lo);  // huge when below row_lo
      if (id[k] >= 0 && r < rows) {
        if (!loaded) {
          WaitBarrier(&s_loaded, 0);
          loaded = true;
        }
        const int64_t i = base + k * kOwnerThreads;
        BulkStore(d_out + static_cast<uint64_t>(i) * args.row_bytes, s_rows + r * args.row_bytes,
                  args.row_bytes, evict_first, store_policy);
      }
    }
  }
  if (!loaded) {
    WaitBarrier(&s_loaded, 0);  // no block may exit while its loads still land
  }
  WaitStoresDone();
#else
  __trap();
#endif
}

}  // namespace emb::kernels::gather

#endif  // EMB_KERNELS_GATHER_ROW_OWNERS_KERNEL_CUH_
