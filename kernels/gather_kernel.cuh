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

// ---------------------------------------------------------------------------------------------
// Row copies through the copy engine (sm_90 and later: cp.async.bulk). These move raw bytes, so
// they serve only gathers whose table and answer types match; the dispatcher checks the rest of
// their preconditions (row bytes a multiple of 16, both base pointers 16-byte aligned). Built as
// empty kernels for older targets, where the dispatcher never picks them.

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define EMB_GATHER_BULK_COPIES 1
#endif

// Blocks of the bulk-rows kernel are one warp, whose lane 0 issues every copy.
inline constexpr int kBulkThreads = 32;
// Shared-memory stages per bulk-rows block, at most.
inline constexpr int kMaxBulkStages = 8;
// Threads per block of the row-owners kernel, and id loads in flight per thread while it scans.
inline constexpr int kOwnerThreads = 256;
inline constexpr int kOwnerIdsPerThread = 16;

// Bits of BulkRowsArgs::flags and RowOwnersArgs::flags (kStreamingStores, kTableEvictLast above
// mean the same here: an L2 evict_first policy on the copy engine's answer stores, evict_last on
// its table loads).

__device__ __forceinline__ uint32_t SharedAddress(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

#if defined(EMB_GATHER_BULK_COPIES)
// One-arrival mbarrier, visible to the copy engine (the async proxy) once this returns.
__device__ __forceinline__ void InitBarrier(uint64_t* bar) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(SharedAddress(bar)) : "memory");
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

// Arrives on `bar` and has its current phase also wait for `bytes` of copies.
__device__ __forceinline__ void ExpectBytes(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(SharedAddress(bar)),
               "r"(bytes)
               : "memory");
}

// Waits until the phase of `bar` with this parity has completed.
__device__ __forceinline__ void WaitBarrier(uint64_t* bar, uint32_t parity) {
  uint32_t done = 0;
  do {
    asm volatile(
        "{\n"
        ".reg .pred p;\n"
        "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n"
        "}\n"
        : "=r"(done)
        : "r"(SharedAddress(bar)), "r"(parity)
        : "memory");
  } while (done == 0);
  // What the copy engine wrote is read next by the copy engine (a bulk store); order the two.
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

// Copies `bytes` (a multiple of 16; both addresses 16-byte aligned) from global memory to this
// block's shared memory; completes on `bar` (complete_tx).
__device__ __forceinline__ void BulkLoad(void* s_dst, const void* d_src, uint32_t bytes,
                                         uint64_t* bar, bool evict_last, uint64_t policy) {
  if (evict_last) {
    asm volatile(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint"
        " [%0], [%1], %2, [%3], %4;" ::"r"(SharedAddress(s_dst)),
        "l"(d_src), "r"(bytes), "r"(SharedAddress(bar)), "l"(policy)
        : "memory");
  } else {
    asm volatile(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"
        " [%0], [%1], %2, [%3];" ::"r"(SharedAddress(s_dst)),
        "l"(d_src), "r"(bytes), "r"(SharedAddress(bar))
        : "memory");
  }
}

// Copies `bytes` from this block's shared memory to global memory, as one bulk group of the
// calling thread.
__device__ __forceinline__ void BulkStore(void* d_dst, const void* s_src, uint32_t bytes,
                                          bool evict_first, uint64_t policy) {
  if (evict_first) {
    asm volatile(
        "cp.async.bulk.global.shared::cta.bulk_group.L2::cache_hint [%0], [%1], %2, %3;" ::"l"(
            d_dst),
        "r"(SharedAddress(s_src)), "r"(bytes), "l"(policy)
        : "memory");
  } else {
    asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(d_dst),
                 "r"(SharedAddress(s_src)), "r"(bytes)
                 : "memory");
  }
  asm volatile("cp.async.bulk.commit_group;" ::: "memory");
}

// Waits until all but the newest one of this thread's bulk stores have read their shared memory.
__device__ __forceinline__ void WaitStoresReadAllButOne() {
  asm volatile("cp.async.bulk.wait_group.read 1;" ::: "memory");
}

// Waits until all of this thread's bulk stores are complete.
__device__ __forceinline__ void WaitStoresDone() {
  asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
}

__device__ __forceinline__ uint64_t EvictFirstPolicy() {
  uint64_t policy;
  asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
  return policy;
}
__device__ __forceinline__ uint64_t EvictLastPolicy() {
  uint64_t policy;
  asm("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(policy));
  return policy;
}
#endif  // EMB_GATHER_BULK_COPIES

// The launch-time constants of GatherBulkRowsKernel.
struct BulkRowsArgs {
  uint64_t total_pieces;      // num_ids * pieces_per_row
  uint64_t pieces_per_block;  // a contiguous run of pieces per block
  uint32_t pieces_per_row;
  uint32_t row_bytes;    // a multiple of 16
  uint32_t piece_bytes;  // a multiple of 16; a row's last piece may be shorter
  uint32_t stages;       // shared-memory stages of piece_bytes each, in [2, kMaxBulkStages]
  uint32_t flags;        // kStreamingStores | kTableEvictLast
};

// Gathers whole rows with the copy engine: answer row i is bytes [0, row_bytes) of table row
// d_ids[i], cut into pieces of piece_bytes. Each block is one warp; its lane 0 walks a contiguous
// run of pieces (so its ids and its part of the answer are contiguous), keeping `stages` pieces in
// shared memory: a bulk load per piece into its stage (completing on the stage's mbarrier), then a
// bulk store from the stage to the answer; a stage is refilled once its store has read it, so
// stages - 1 loads stay in flight while the stores drain. No registers hold row data, so a block
// of 32 threads keeps up to 8 pieces (128 KB) in flight. Not the default anywhere: on the H200 it
// measured 2% to 15% slower than GatherUnitsKernel on every shape it serves (the sweep keeps it).
//
// Preconditions (checked on the host): sm_90 or later; dynamic shared memory of stages *
// piece_bytes; d_table, d_out 16-byte aligned; ids in [0, num_rows); the answer overlaps neither
// the table nor the ids.
__global__ void __launch_bounds__(kBulkThreads)
    GatherBulkRowsKernel(const uint8_t* __restrict__ d_table, const int64_t* __restrict__ d_ids,
                         BulkRowsArgs args, uint8_t* __restrict__ d_out) {
#if defined(EMB_GATHER_BULK_COPIES)
  extern __shared__ __align__(128) uint8_t s_stages[];
  __shared__ uint64_t s_full[kMaxBulkStages];
  if (threadIdx.x != 0) {
    return;
  }
  const uint64_t first = blockIdx.x * args.pieces_per_block;
  if (first >= args.total_pieces) {
    return;
  }
  const uint64_t count = min(args.pieces_per_block, args.total_pieces - first);
  const bool evict_last = (args.flags & kTableEvictLast) != 0;
  const bool evict_first = (args.flags & kStreamingStores) != 0;
  const uint64_t load_policy = evict_last ? EvictLastPolicy() : 0;
  const uint64_t store_policy = evict_first ? EvictFirstPolicy() : 0;
  const uint32_t stages = args.stages;
  for (uint32_t s = 0; s < stages; ++s) {
    InitBarrier(&s_full[s]);
  }
  // Warm L1 with the block's ids (up to 32 lines of 16 ids), so that the loop's id loads hit.
  {
    const uint64_t row_first = first / args.pieces_per_row;
    const uint64_t row_last = min((first + count - 1) / args.pieces_per_row, row_first + 511);
    for (uint64_t r = row_first; r <= row_last; r += 16) {
      asm volatile("prefetch.global.L1 [%0];" ::"l"(d_ids + r));
    }
    asm volatile("prefetch.global.L1 [%0];" ::"l"(d_ids + row_last));
  }

  // Where piece `first + j` is: its row (answer row), byte offset in the row, and length.
  auto locate = [&](uint64_t j, uint64_t* row, uint32_t* offset, uint32_t* bytes) {
    const uint64_t piece = first + j;
    const uint64_t r = args.pieces_per_row == 1 ? piece : piece / args.pieces_per_row;
    const uint32_t o = static_cast<uint32_t>(piece - r * args.pieces_per_row) * args.piece_bytes;
    *row = r;
    *offset = o;
    *bytes = min(args.piece_bytes, args.row_bytes - o);
  };
  auto load = [&](uint64_t j, uint32_t stage) {
    uint64_t row;
    uint32_t offset;
    uint32_t bytes;
    locate(j, &row, &offset, &bytes);
    const uint64_t id = static_cast<uint64_t>(__ldg(d_ids + row));
    ExpectBytes(&s_full[stage], bytes);
    BulkLoad(s_stages + size_t{stage} * args.piece_bytes, d_table + id * args.row_bytes + offset,
             bytes, &s_full[stage], evict_last, load_policy);
  };

  const uint64_t prologue = min(uint64_t{stages}, count);
  for (uint32_t s = 0; s < prologue; ++s) {
    load(s, s);
  }
  uint32_t stage = 0;
  uint32_t parity = 0;
  for (uint64_t j = 0; j < count; ++j) {
    WaitBarrier(&s_full[stage], parity);
    uint64_t row;
    uint32_t offset;
    uint32_t bytes;
    locate(j, &row, &offset, &bytes);
    BulkStore(d_out + row * args.row_bytes + offset, s_stages + size_t{stage} * args.piece_bytes,
              bytes, evict_first, store_policy);
    // Refill the previous stage (its store was issued one step ago) with the piece `stages`
    // after it.
    if (j >= 1 && j - 1 + stages < count) {
      WaitStoresReadAllButOne();
      load(j - 1 + stages, stage == 0 ? stages - 1 : stage - 1);
    }
    if (++stage == stages) {
      stage = 0;
      parity ^= 1;
    }
  }
  WaitStoresDone();
#else
  __trap();
#endif
}

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

#endif  // EMB_KERNELS_GATHER_KERNEL_CUH_
