// The gather kernel: copies table rows picked by ids into a contiguous answer,
// converting the element type on the way. Private to kernels/;
// gather_dispatch.cu instantiates and launches it. Device code only: no Abseil,
// gRPC or protobuf here (STYLE §1).
#ifndef EMB_KERNELS_GATHER_KERNEL_CUH_
#define EMB_KERNELS_GATHER_KERNEL_CUH_

#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/data_type.h"

namespace emb::kernels::gather {

// Threads per block of every gather kernel.
inline constexpr int kBlockThreads = 256;

// Resident blocks per multiprocessor that a kernel is compiled to fit (__launch_bounds__), so
// that the launcher knows the size of a resident wave without asking: 8 (2048 threads, the
// sm_80/sm_90 maximum, so at most 32 registers) for up to 32 bytes in flight per thread over at
// most 4 loads; else 6 (at most 40 registers).
template <int kUnroll, int kUnitBytes>
inline constexpr int kMinBlocksPerSm = (kUnroll <= 4 && kUnroll * kUnitBytes <= 32) ? 8 : 6;

// The unrolls (units in flight per thread) instantiated for a unit size, by unroll level 0..2:
// 16-byte units take 1, 2 or 4; narrower ones 2, 4 or 8.
inline constexpr int kUnrollLevels = 3;
template <int kUnitBytes>
constexpr int UnrollAt(int level) {
  return kUnitBytes >= 16 ? (1 << level) : (2 << level);
}

// Bits of GatherArgs::flags.
inline constexpr uint32_t kStreamingStores = 1;  // answer stores are st.global.cs (evict-first)
inline constexpr uint32_t kTableEvictLast = 2;   // table loads carry an L2 evict_last policy

// Element types, as the bits they are stored in.
struct F32 {
  using Bits = uint32_t;
};
struct F16 {
  using Bits = uint16_t;
};
struct BF16 {
  using Bits = uint16_t;
};

// Widening is exact. A NaN keeps its payload bits, as HalfToFloat /
// BFloat16ToFloat do on the host (the hardware conversion would make it
// canonical).
__device__ __forceinline__ float ToFloat(F32, uint32_t b) { return __uint_as_float(b); }
__device__ __forceinline__ float ToFloat(BF16, uint16_t b) { return BFloat16ToFloat(b); }
__device__ __forceinline__ float ToFloat(F16, uint16_t b) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(b));
  if ((b & 0x7fffu) > 0x7c00u) {  // NaN
    f = __uint_as_float((uint32_t{b & 0x8000u} << 16) | 0x7f800000u | (uint32_t{b & 0x3ffu} << 13));
  }
  return f;
}

// Narrowing uses the hardware's round-to-nearest-even conversion, which matches
// FloatToHalf / FloatToBFloat16 bit for bit on every non-NaN input (subnormals
// and overflow to infinity included; gather_gpu_test checks it). Only NaN
// differs: the hardware gives the canonical NaN, so NaN takes the host's
// quieted-payload pattern instead.
__device__ __forceinline__ uint32_t FromFloat(F32, float f) { return __float_as_uint(f); }
__device__ __forceinline__ uint16_t FromFloat(F16, float f) {
  uint16_t h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
  if (f != f) {
    const uint32_t u = __float_as_uint(f);
    h = static_cast<uint16_t>(((u >> 16) & 0x8000u) | 0x7e00u | ((u >> 13) & 0x3ffu));
  }
  return h;
}
__device__ __forceinline__ uint16_t FromFloat(BF16, float f) {
  uint16_t h;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f));
  if (f != f) {
    h = static_cast<uint16_t>((__float_as_uint(f) >> 16) | 0x0040u);
  }
  return h;
}

// The register type of one memory access of kBytes.
template <int kBytes>
struct Vec;
template <>
struct Vec<16> {
  using Type = uint4;
};
template <>
struct Vec<8> {
  using Type = uint2;
};
template <>
struct Vec<4> {
  using Type = unsigned int;
};
template <>
struct Vec<2> {
  using Type = unsigned short;
};

// kN consecutive elements of T, moved as one access.
template <typename T, int kN>
struct Unit {
  using Bits = typename T::Bits;
  static constexpr int kBytes = kN * static_cast<int>(sizeof(Bits));
  using Type = typename Vec<kBytes>::Type;
};

// The wider of the load and store of one unit.
template <typename In, typename Out, int kN>
inline constexpr int kWiderUnitBytes =
    Unit<In, kN>::kBytes > Unit<Out, kN>::kBytes ? Unit<In, kN>::kBytes : Unit<Out, kN>::kBytes;

// Converts one unit of kN elements from In to Out; the identity when the types
// match (the CPU gather memcpy's then, so even NaN payloads are copied bit for
// bit).
template <typename In, typename Out, int kN>
__device__ __forceinline__ typename Unit<Out, kN>::Type ConvertUnit(typename Unit<In, kN>::Type v) {
  if constexpr (std::is_same_v<In, Out>) {
    return v;
  } else {
    typename In::Bits in[kN];
    typename Out::Bits out[kN];
    static_assert(sizeof(in) == sizeof(v));
    memcpy(in, &v, sizeof(in));
#pragma unroll
    for (int i = 0; i < kN; ++i) {
      out[i] = FromFloat(Out{}, ToFloat(In{}, in[i]));
    }
    typename Unit<Out, kN>::Type r;
    static_assert(sizeof(out) == sizeof(r));
    memcpy(&r, out, sizeof(r));
    return r;
  }
}

// Divides n in [0, 2^31) by a divisor d in [1, 2^31) fixed at launch, without a
// divide: q = (n * m) >> p with p = 31 + ceil(log2 d) and m = ceil(2^p / d) <
// 2^32. Exact: m * d - 2^p < d, so the error term n * (m * d - 2^p) / (d * 2^p)
// < n / 2^p < 2^-ceil(log2 d) <= 1 / d.
struct FastDivmod {
  uint32_t divisor = 1;
  uint32_t multiplier = 1u << 31;
  uint32_t shift = 31;

  __host__ static FastDivmod Make(uint32_t d) {
    uint32_t log2_ceil = 0;
    while ((uint64_t{1} << log2_ceil) < d) {
      ++log2_ceil;
    }
    FastDivmod f;
    f.divisor = d;
    f.shift = 31 + log2_ceil;
    f.multiplier = static_cast<uint32_t>(((uint64_t{1} << f.shift) + d - 1) / d);
    return f;
  }

  __host__ __device__ __forceinline__ uint32_t Div(uint32_t n) const {
    return static_cast<uint32_t>((static_cast<uint64_t>(n) * multiplier) >> shift);
  }
};

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

#endif  // EMB_KERNELS_GATHER_KERNEL_CUH_
