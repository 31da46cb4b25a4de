// GatherUnitsKernel, the gather of every type pair and row length: copies table rows picked by
// ids into a contiguous answer in 2- to 16-byte units, converting the element type on the way.
// Private to kernels/; gather/units_launch.cu instantiates and launches it. Device code only: no
// Abseil, gRPC or protobuf here (STYLE §1).
#ifndef EMB_KERNELS_GATHER_UNITS_KERNEL_CUH_
#define EMB_KERNELS_GATHER_UNITS_KERNEL_CUH_

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/gather/element_types.cuh"
#include "kernels/gather/fast_divmod.cuh"

namespace emb::kernels::gather {

// Threads per block of every gather kernel.
inline constexpr int kBlockThreads = 256;

// Resident blocks per multiprocessor that a kernel is compiled to fit (__launch_bounds__), so
// that the launcher knows the size of a resident wave without asking: 8 (2048 threads, the
// sm_80/sm_90 maximum, so at most 32 registers) for up to 32 bytes in flight per thread over at
// most 4 loads; 6 (at most 40 registers) for up to 64 bytes over at most 8 loads; else 4 (at most
// 64 registers), for the deepest level.
template <int kUnroll, int kUnitBytes>
inline constexpr int kMinBlocksPerSm = (kUnroll <= 4 && kUnroll * kUnitBytes <= 32)   ? 8
                                       : (kUnroll <= 8 && kUnroll * kUnitBytes <= 64) ? 6
                                                                                      : 4;

// The unrolls (units in flight per thread) instantiated for a unit size, by unroll level 0..3:
// 16-byte units take 1, 2, 4 or 8; narrower ones 2, 4, 8 or 16. Level 3 keeps the most bytes in
// flight per thread (the memory-level parallelism of Liger's large 2-D tiles) at a lower
// occupancy.
inline constexpr int kUnrollLevels = 4;
template <int kUnitBytes>
constexpr int UnrollAt(int level) {
  return kUnitBytes >= 16 ? (1 << level) : (2 << level);
}

// Bits of GatherArgs::flags.
inline constexpr uint32_t kStreamingStores = 1;  // answer stores are st.global.cs (evict-first)
inline constexpr uint32_t kTableEvictLast = 2;   // table loads carry an L2 evict_last policy

// Read-only load of one table unit; with `evict_last`, under an L2 evict_last cache policy so
// that table rows outlive the streaming answer in L2.
__device__ __forceinline__ uint4 LoadTable(const uint4* p, bool evict_last, uint64_t policy) {
  if (!evict_last) {
    return __ldg(p);
  }
  uint4 v;
  asm("ld.global.nc.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(p), "l"(policy));
  return v;
}
__device__ __forceinline__ uint2 LoadTable(const uint2* p, bool evict_last, uint64_t policy) {
  if (!evict_last) {
    return __ldg(p);
  }
  uint2 v;
  asm("ld.global.nc.L2::cache_hint.v2.u32 {%0, %1}, [%2], %3;"
      : "=r"(v.x), "=r"(v.y)
      : "l"(p), "l"(policy));
  return v;
}
__device__ __forceinline__ unsigned int LoadTable(const unsigned int* p, bool evict_last,
                                                  uint64_t policy) {
  if (!evict_last) {
    return __ldg(p);
  }
  unsigned int v;
  asm("ld.global.nc.L2::cache_hint.u32 %0, [%1], %2;" : "=r"(v) : "l"(p), "l"(policy));
  return v;
}
__device__ __forceinline__ unsigned short LoadTable(const unsigned short* p, bool evict_last,
                                                    uint64_t policy) {
  if (!evict_last) {
    return __ldg(p);
  }
  unsigned short v;
  asm("ld.global.nc.L2::cache_hint.u16 %0, [%1], %2;" : "=h"(v) : "l"(p), "l"(policy));
  return v;
}

// Stores one answer unit: evict-first (st.global.cs) when `streaming`, else a plain store.
template <typename V>
__device__ __forceinline__ void StoreAnswer(V* p, V v, bool streaming) {
  if (streaming) {
    __stcs(p, v);
  } else {
    *p = v;
  }
}

// The launch-time constants of a gather kernel besides its pointers.
struct GatherArgs {
  FastDivmod units_per_row;
  uint32_t total_units;   // answer units of this launch, < 2^30
  uint32_t block_stride;  // units between the first tiles of consecutive blocks
  uint32_t tile_stride;   // units between consecutive tiles of one block
  uint32_t share_units;   // 0: a block's tiles run to total_units; else the span it owns
  uint32_t flags;         // kStreamingStores | kTableEvictLast
};

// Gathers with units of kN elements: answer unit c (row c / units_per_row, column
// c % units_per_row) is table unit d_ids[row] * units_per_row + column, converted to Out.
//
// Thread mapping: the answer is a flat array of units, cut into tiles of kBlockThreads * kUnroll
// units; thread t of a block handles units t, t + 256, ... of each of its tiles, so stores are
// fully coalesced whatever the row length and loads are coalesced along each row. Block b's tiles
// start at b * block_stride and step by tile_stride. Interleaved (block_stride = one tile,
// tile_stride = the grid's tiles): the grid sweeps the answer front to back, a compact window at
// a time; by default the grid has a block per tile (up to a cap), so the hardware schedules the
// tiles in order and balances the tail. Shares (block_stride = tile_stride * tiles per block,
// share_units set): each block owns one contiguous span. Each thread issues all kUnroll loads of
// a tile (the id an L1-cached __ldg, then the row unit) before it converts and stores.
//
// Preconditions (checked on the host): total_units < 2^30, and gridDim.x * block_stride and
// total_units + tile_stride fit in 32 bits; pointers aligned to their unit size; ids in [0,
// num_rows); the answer overlaps neither the table nor the ids.
template <typename In, typename Out, int kN, int kUnroll>
__global__ void __launch_bounds__(kBlockThreads,
                                  kMinBlocksPerSm<kUnroll, kWiderUnitBytes<In, Out, kN>>)
    GatherUnitsKernel(const typename Unit<In, kN>::Type* __restrict__ d_table,
                      const int64_t* __restrict__ d_ids, GatherArgs args,
                      typename Unit<Out, kN>::Type* __restrict__ d_out) {
  using InVec = typename Unit<In, kN>::Type;
  constexpr uint32_t kTile = kBlockThreads * kUnroll;
  const uint64_t row_units = args.units_per_row.divisor;
  const bool streaming = (args.flags & kStreamingStores) != 0;
  const bool evict_last = (args.flags & kTableEvictLast) != 0;
  uint64_t policy = 0;
  if (evict_last) {
    asm("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(policy));
  }
  const uint32_t begin = blockIdx.x * args.block_stride;
  const uint32_t end =
      args.share_units == 0 ? args.total_units : min(begin + args.share_units, args.total_units);

  for (uint32_t tile = begin; tile < end; tile += args.tile_stride) {
    const uint32_t first = tile + threadIdx.x;
    InVec v[kUnroll];
    if (tile + kTile <= end) {  // a full tile: no bounds checks
#pragma unroll
      for (int k = 0; k < kUnroll; ++k) {
        const uint32_t c = first + k * kBlockThreads;
        const uint32_t row = args.units_per_row.Div(c);
        const uint32_t col = c - row * args.units_per_row.divisor;
        const uint64_t id = static_cast<uint64_t>(__ldg(d_ids + row));
        v[k] = LoadTable(d_table + (id * row_units + col), evict_last, policy);
      }
#pragma unroll
      for (int k = 0; k < kUnroll; ++k) {
        StoreAnswer(d_out + (first + k * kBlockThreads), ConvertUnit<In, Out, kN>(v[k]), streaming);
      }
    } else {
#pragma unroll
      for (int k = 0; k < kUnroll; ++k) {
        const uint32_t c = first + k * kBlockThreads;
        if (c < end) {
          const uint32_t row = args.units_per_row.Div(c);
          const uint32_t col = c - row * args.units_per_row.divisor;
          const uint64_t id = static_cast<uint64_t>(__ldg(d_ids + row));
          v[k] = LoadTable(d_table + (id * row_units + col), evict_last, policy);
        }
      }
#pragma unroll
      for (int k = 0; k < kUnroll; ++k) {
        const uint32_t c = first + k * kBlockThreads;
        if (c < end) {
          StoreAnswer(d_out + c, ConvertUnit<In, Out, kN>(v[k]), streaming);
        }
      }
    }
  }
}

}  // namespace emb::kernels::gather

#endif  // EMB_KERNELS_GATHER_UNITS_KERNEL_CUH_
