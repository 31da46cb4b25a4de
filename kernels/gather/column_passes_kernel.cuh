// GatherColumnPassesKernel: the gather in column passes, for tables larger than L2 whose rows the
// ids repeat. Private to kernels/; gather/column_passes_launch.cu launches it.
#ifndef EMB_KERNELS_GATHER_COLUMN_PASSES_KERNEL_CUH_
#define EMB_KERNELS_GATHER_COLUMN_PASSES_KERNEL_CUH_

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/gather/fast_divmod.cuh"
#include "kernels/gather/units_kernel.cuh"

namespace emb::kernels::gather {

// The launch-time constants of GatherColumnPassesKernel.
struct ColumnPassesArgs {
  FastDivmod pass_units;   // answer units of one pass: num_ids * chunk_units
  FastDivmod chunk_units;  // 16-byte units of a row that one pass copies; divides row_units
  uint32_t row_units;      // 16-byte units of a row
  uint32_t total_units;    // answer units, < 2^31
  uint32_t flags;          // kStreamingStores | kTableEvictLast
};

// Copies the answer in passes over column chunks: pass j copies units [j * chunk_units, (j + 1)
// * chunk_units) of every answer row, rows in order, before the next pass begins (the grid walks
// the passes front to back, a tile per block). A pass reads only that chunk of the table, so when
// num_rows * chunk bytes fits L2, a row that the ids repeat is read from memory once per chunk and
// from L2 after that, as if the ids had been deduplicated.
//
// Preconditions (checked on the host): raw bytes (equal table and answer types), rows a multiple
// of 16 bytes, 16-byte aligned pointers; ids in [0, num_rows); the answer overlaps neither the
// table nor the ids.
template <int kUnroll>
__global__ void __launch_bounds__(kBlockThreads, kMinBlocksPerSm<kUnroll, 16>)
    GatherColumnPassesKernel(const uint4* __restrict__ d_table, const int64_t* __restrict__ d_ids,
                             ColumnPassesArgs args, uint4* __restrict__ d_out) {
  constexpr uint32_t kTile = kBlockThreads * kUnroll;
  const bool streaming = (args.flags & kStreamingStores) != 0;
  const bool evict_last = (args.flags & kTableEvictLast) != 0;
  uint64_t policy = 0;
  if (evict_last) {
    asm("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(policy));
  }
  for (uint32_t tile = blockIdx.x * kTile; tile < args.total_units; tile += gridDim.x * kTile) {
    uint4 v[kUnroll];
    uint64_t to[kUnroll];
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) {
      const uint32_t p = tile + threadIdx.x + k * kBlockThreads;
      to[k] = ~uint64_t{0};
      if (p < args.total_units) {
        const uint32_t pass = args.pass_units.Div(p);
        const uint32_t in_pass = p - pass * args.pass_units.divisor;
        const uint32_t row = args.chunk_units.Div(in_pass);
        const uint32_t col =
            pass * args.chunk_units.divisor + (in_pass - row * args.chunk_units.divisor);
        const uint64_t id = static_cast<uint64_t>(__ldg(d_ids + row));
        v[k] = LoadTable(d_table + (id * args.row_units + col), evict_last, policy);
        to[k] = uint64_t{row} * args.row_units + col;
      }
    }
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) {
      if (to[k] != ~uint64_t{0}) {
        StoreAnswer(d_out + to[k], v[k], streaming);
      }
    }
  }
}

}  // namespace emb::kernels::gather

#endif  // EMB_KERNELS_GATHER_COLUMN_PASSES_KERNEL_CUH_
