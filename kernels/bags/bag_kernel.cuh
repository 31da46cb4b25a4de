// The bag kernel (see kernels/pooled_lookup.h): pools bags of rows, or gathers rows, from a table
// of any type. Private to kernels/.
//
// A group of `group` lanes (a power of two up to a warp) owns one (bag, column tile). Lane l of
// the group loads vector l + group * k (k < kTileVectors) of each of the bag's rows, kVecBytes
// bytes each, so that a group's loads of a row are one contiguous run; it loads kUnroll rows
// before it adds any (several misses in flight), then adds them in id order, each product and
// each sum rounded once (CpuPooledGather's order, so the results agree to the bit). For a table in
// two tiers (CachedRows) each row is read from the cache or the host rows, as its slot says. A
// plain gather (bags of one id, no weights or scales) runs GatherKernel: a group loads several rows
// at once, each for its own answer row.
#ifndef EMB_KERNELS_BAGS_BAG_KERNEL_CUH_
#define EMB_KERNELS_BAGS_BAG_KERNEL_CUH_

#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/data_type.h"
#include "kernels/device_bags.h"
#include "kernels/quantize.h"

namespace emb::kernels::bags {

inline constexpr int kBlockThreads = 256;
// Blocks each SM must be able to hold (a bound on registers a thread), and whether PoolItem stages
// a bag's ids (see there). Measured on the H200 (docs/benchmarks.md): staging the ids took 4% to
// 26% off the pooled cases. With unchecked loads (PoolItem) a float32 bag kernel of one tile needs
// 80 registers, and bound to 4 blocks (64 registers, 8 bytes spilled) it was up to 6% faster
// still; two tiles spill 36 bytes under that bound and ran 1.5% slower, the other
// table types need 90 to 180 registers, and GatherKernel spills under any bound tighter than its
// own 128: those are not bound. Builds for benchmarks may set others (-DEMB_BAG_MIN_BLOCKS=N
// for every table type, -DEMB_GATHER_MIN_BLOCKS=N, -DEMB_BAG_STAGE_IDS=0 or 1;
// bench/kernels/build_bag_variant.sh) to measure them side by side.
#ifndef EMB_GATHER_MIN_BLOCKS
#define EMB_GATHER_MIN_BLOCKS 1
#endif
#ifndef EMB_BAG_STAGE_IDS
#define EMB_BAG_STAGE_IDS 1
#endif
template <DataType kT, int kTileVectors>
inline constexpr int kBagMinBlocks =
#ifdef EMB_BAG_MIN_BLOCKS
    EMB_BAG_MIN_BLOCKS;
#else
    kT == DataType::kFloat32&& kTileVectors == 1 ? 4 : 1;
#endif
inline constexpr int kGatherMinBlocks = EMB_GATHER_MIN_BLOCKS;
inline constexpr bool kStageIds = EMB_BAG_STAGE_IDS != 0;
// Short bags (fewer than kShortBagIds ids on average; 0: none are) of one tile run their own
// kernel: ids loaded one by one (no staging), kShortUnroll rows a step, bound to kShortMinBlocks
// blocks an SM (as the others of their type unless set). Builds for benchmarks may set others
// (-DEMB_BAG_SHORT_IDS=N, -DEMB_BAG_SHORT_UNROLL=N, -DEMB_BAG_SHORT_MIN_BLOCKS=N).
#ifndef EMB_BAG_SHORT_IDS
#define EMB_BAG_SHORT_IDS 16
#endif
#ifndef EMB_BAG_SHORT_UNROLL
#define EMB_BAG_SHORT_UNROLL 8
#endif
inline constexpr int64_t kShortBagIds = EMB_BAG_SHORT_IDS;
inline constexpr int kShortUnroll = EMB_BAG_SHORT_UNROLL;
template <DataType kT>
inline constexpr int kShortMinBlocks =
#ifdef EMB_BAG_SHORT_MIN_BLOCKS
    EMB_BAG_SHORT_MIN_BLOCKS;
#else
    kBagMinBlocks<kT, 1>;
#endif

// What the launcher chose for a launch.
struct BagGrid {
  int group;         // lanes per (bag, tile): a power of two, up to 32
  int64_t vectors;   // per row: dim / values per vector
  int64_t tiles;     // per bag
  size_t row_bytes;  // of the table
};

// The unsigned type of a load of `kBytes` (1 to 16).
template <int kBytes>
struct RawType;
template <>
struct RawType<16> {
  using type = uint4;
};
template <>
struct RawType<8> {
  using type = uint2;
};
template <>
struct RawType<4> {
  using type = unsigned int;
};
template <>
struct RawType<2> {
  using type = unsigned short;
};
template <>
struct RawType<1> {
  using type = unsigned char;
};

// Elements per vector of kVecBytes bytes of a row of type kT; kVecBytes 0 means one element
// (int4 rows of odd dim).
template <DataType kT, int kVecBytes>
inline constexpr int kValuesPerVector = kT == DataType::kInt4Rowwise
                                            ? (kVecBytes == 0 ? 1 : 2 * kVecBytes)
                                        : kT == DataType::kInt8Rowwise
                                            ? kVecBytes
                                            : kVecBytes / static_cast<int>(ElementSize(kT));

// One vector of a row as loaded: its raw bytes.
template <int kVecBytes>
struct RawVector {
  static constexpr int kBytes = kVecBytes == 0 ? 1 : kVecBytes;
  alignas(kBytes) unsigned char b[kBytes];
};

// Loads the vector of row `row` that starts at element `col`.
template <DataType kT, int kVecBytes>
__device__ __forceinline__ RawVector<kVecBytes> LoadVector(const uint8_t* row, int64_t col) {
  RawVector<kVecBytes> v;
  constexpr int kBytes = RawVector<kVecBytes>::kBytes;
  size_t offset;
  if constexpr (kT == DataType::kInt4Rowwise) {
    offset = static_cast<size_t>(col / 2);
  } else if constexpr (kT == DataType::kInt8Rowwise) {
    offset = static_cast<size_t>(col);
  } else {
    offset = static_cast<size_t>(col) * ElementSize(kT);
  }
  using Raw = typename RawType<kBytes>::type;
  const Raw raw = __ldg(reinterpret_cast<const Raw*>(row + offset));
  memcpy(v.b, &raw, kBytes);
  return v;
}

// A quantized row's scale and bias, with one aligned load where the layout allows.
template <DataType kT>
__device__ __forceinline__ RowScale LoadScale(const uint8_t* row, int64_t dim) {
  if constexpr (kT == DataType::kInt8Rowwise) {
    const uint8_t* p = row + dim;
    if ((reinterpret_cast<uintptr_t>(p) & 7) == 0) {
      const uint2 u = __ldg(reinterpret_cast<const uint2*>(p));
      return {__uint_as_float(u.x), __uint_as_float(u.y)};
    }
  } else if constexpr (kT == DataType::kInt4Rowwise) {
    const uint8_t* p = row + (dim + 1) / 2;
    if ((reinterpret_cast<uintptr_t>(p) & 3) == 0) {
      const unsigned int u = __ldg(reinterpret_cast<const unsigned int*>(p));
      return {HalfToFloat(static_cast<uint16_t>(u & 0xffffu)),
              HalfToFloat(static_cast<uint16_t>(u >> 16))};
    }
  }
  return LoadRowScale(row, kT, dim);
}

// A quantized level q given as the float bits 0x4b000000 | q (2^23 + q), as q: exact.
__device__ __forceinline__ float LevelAsFloat(unsigned int bits) {
  return __fsub_rn(__uint_as_float(bits), 8388608.0f);
}

// The vector's elements as float; `col` (its first element) picks the nibble of a one-element
// int4 vector.
template <DataType kT, int kVecBytes>
__device__ __forceinline__ void Decode(const RawVector<kVecBytes>& v, int64_t col, RowScale s,
                                       float* x) {
  constexpr int kValues = kValuesPerVector<kT, kVecBytes>;
  if constexpr (kT == DataType::kFloat32) {
    memcpy(x, v.b, sizeof(float) * kValues);
  } else if constexpr (kT == DataType::kFloat16 || kT == DataType::kBFloat16) {
    uint16_t h[kValues];
    memcpy(h, v.b, sizeof(h));
#pragma unroll
    for (int i = 0; i < kValues; ++i) {
      x[i] = kT == DataType::kFloat16 ? HalfToFloat(h[i]) : BFloat16ToFloat(h[i]);
    }
  } else if constexpr (kT == DataType::kInt8Rowwise) {
    // A level q becomes 2^23 + q by putting its byte under a float's exponent (one byte permute,
    // exact), less 2^23: q itself, without the integer-to-float conversion's slower pipe.
#pragma unroll
    for (int w = 0; w < (kValues + 3) / 4; ++w) {
      unsigned int word = 0;
      memcpy(&word, v.b + 4 * w, kValues - 4 * w < 4 ? kValues - 4 * w : 4);
#pragma unroll
      for (int j = 0; j < 4 && 4 * w + j < kValues; ++j) {
        x[4 * w + j] = DequantizeValue(LevelAsFloat(__byte_perm(word, 0x4b000000u, 0x7440u + j)),
                                       s.scale, s.bias);
      }
    }
  } else if constexpr (kVecBytes == 0) {  // one int4 element
    x[0] = DequantizeValue(LevelAsFloat(0x4b000000u | ((v.b[0] >> (4 * (col & 1))) & 0xfu)),
                           s.scale, s.bias);
  } else {
#pragma unroll
    for (int i = 0; i < kValues; ++i) {
      x[i] = DequantizeValue(LevelAsFloat(0x4b000000u | ((v.b[i / 2] >> (4 * (i & 1))) & 0xfu)),
                             s.scale, s.bias);
    }
  }
}

// Writes `bytes` bytes from `src` (16-byte aligned) at `dst` with the widest stores its alignment
// allows.
__device__ __forceinline__ void StoreBytes(unsigned char* dst, const unsigned char* src,
                                           int bytes) {
  const auto a = reinterpret_cast<uintptr_t>(dst);
  if ((a & 15) == 0 && bytes % 16 == 0) {
    for (int i = 0; i < bytes; i += 16) {
      *reinterpret_cast<uint4*>(dst + i) = *reinterpret_cast<const uint4*>(src + i);
    }
  } else if ((a & 7) == 0 && bytes % 8 == 0) {
    for (int i = 0; i < bytes; i += 8) {
      *reinterpret_cast<uint2*>(dst + i) = *reinterpret_cast<const uint2*>(src + i);
    }
  } else if ((a & 3) == 0 && bytes % 4 == 0) {
    for (int i = 0; i < bytes; i += 4) {
      *reinterpret_cast<unsigned int*>(dst + i) = *reinterpret_cast<const unsigned int*>(src + i);
    }
  } else {
    for (int i = 0; i < bytes; ++i) {
      dst[i] = src[i];
    }
  }
}

// Rounds x[0..kValues) to half or bfloat16 (`half`) into h: two at a time with the hardware's
// paired conversion, unless one is NaN, which takes FloatToHalf / FloatToBFloat16's payload (the
// hardware's is canonical).
template <int kValues>
__device__ __forceinline__ void Narrow(const float* x, bool half, uint16_t* h) {
  bool nan = false;
#pragma unroll
  for (int i = 0; i < kValues; ++i) {
    nan |= x[i] != x[i];
  }
  if (nan || kValues % 2 != 0) {
#pragma unroll
    for (int i = 0; i < kValues; ++i) {
      h[i] = half ? FloatToHalf(x[i]) : FloatToBFloat16(x[i]);
    }
    return;
  }
#pragma unroll
  for (int i = 0; i + 1 < kValues; i += 2) {
    unsigned int pair;  // x[i] in the low half, x[i + 1] in the high
    if (half) {
      asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(pair) : "f"(x[i + 1]), "f"(x[i]));
    } else {
      asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(pair) : "f"(x[i + 1]), "f"(x[i]));
    }
    h[i] = static_cast<uint16_t>(pair & 0xffffu);
    h[i + 1] = static_cast<uint16_t>(pair >> 16);
  }
}

// Writes kValues floats, rounded to `t`, as elements [col, col + kValues) of `out_row`.
template <int kValues>
__device__ __forceinline__ void StoreOut(void* out_row, DataType t, int64_t col, const float* x) {
  alignas(16) unsigned char buf[kValues * 4];
  int bytes;
  if (t == DataType::kFloat32) {
    memcpy(buf, x, sizeof(float) * kValues);
    bytes = kValues * 4;
  } else {
    uint16_t h[kValues];
    Narrow<kValues>(x, t == DataType::kFloat16, h);
    memcpy(buf, h, sizeof(h));
    bytes = kValues * 2;
  }
  StoreBytes(static_cast<unsigned char*>(out_row) + static_cast<size_t>(col) * (bytes / kValues),
             buf, bytes);
}

// Where row `id` is: in the table, or for a table in two tiers in its cache or its host rows;
// adds one to `misses` for a host row when `counting`.
__device__ __forceinline__ const uint8_t* RowAddress(const DeviceBags& p, const BagGrid& g,
                                                     int64_t id, bool counting, unsigned* misses) {
  if (p.cached.slots != nullptr) {
    const int32_t slot = __ldg(p.cached.slots + id);
    if (slot >= 0) {
      return static_cast<const uint8_t*>(p.cached.cache) + static_cast<size_t>(slot) * g.row_bytes;
    }
    *misses += counting ? 1 : 0;
  }
  return static_cast<const uint8_t*>(p.table) + static_cast<size_t>(id) * g.row_bytes;
}

// Adds the block's `misses` to one of the launch's miss counters: one atomic a block. Every
// thread of the block calls it.
__device__ __forceinline__ void CountMisses(unsigned long long* counters, unsigned misses) {
  __shared__ unsigned block_misses;
  if (threadIdx.x == 0) {
    block_misses = 0;
  }
  __syncthreads();
  if (misses != 0) {
    atomicAdd(&block_misses, misses);
  }
  __syncthreads();
  if (threadIdx.x == 0 && block_misses != 0) {
    atomicAdd(counters + blockIdx.x % CachedRows::kMissCounters, block_misses);
  }
}

// One (bag, column tile) `item`, for lane `lane` of its group; returns the host rows it read (for
// a table in two tiers, counted by the group's lane 0 in the first tile).
template <DataType kT, int kVecBytes, int kTileVectors, int kUnroll, bool kStage>
__device__ __forceinline__ unsigned PoolItem(const DeviceBags& p, const BagGrid& g, int64_t item,
                                             int lane) {
  constexpr int kValues = kValuesPerVector<kT, kVecBytes>;
  const int64_t bag = g.tiles == 1 ? item : item / g.tiles;  // a 64-bit divide only if needed
  const int64_t tile = item - bag * g.tiles;
  const int64_t first_vector = tile * g.group * kTileVectors + lane;
  const int64_t begin = p.offsets != nullptr ? p.offsets[bag] : bag;
  const int64_t end = p.offsets != nullptr ? p.offsets[bag + 1] : bag + 1;
  const bool weighted = p.weights != nullptr;
  const bool counting = tile == 0 && lane == 0;
  unsigned misses = 0;

  // The vector each of the lane's tile vectors loads: past the row's last vector (a lane beyond
  // it: vectors not a power of two, or the last tile), the last one, read and summed but never
  // stored. Loads without a bounds check take the kernel from 118 to 80 registers (float32 rows
  // of 128 at 8 rows a step): a predicated load keeps its old value live.
  int64_t loaded[kTileVectors];
#pragma unroll
  for (int k = 0; k < kTileVectors; ++k) {
    const int64_t v = first_vector + static_cast<int64_t>(k) * g.group;
    loaded[k] = v < g.vectors ? v : g.vectors - 1;
  }
  float acc[kTileVectors][kValues];
#pragma unroll
  for (int k = 0; k < kTileVectors; ++k) {
#pragma unroll
    for (int i = 0; i < kValues; ++i) {
      acc[k][i] = 0.0f;
    }
  }
  // Adds kRows rows of the bag, with ids `id(u)` and weights `weight(u)`: every load first,
  // then the sums in id order.
  auto add_rows = [&](auto rows_constant, auto id, auto weight) {
    constexpr int kRows = decltype(rows_constant)::value;
    // The ids, then the rows' addresses, then the rows: each step's loads all in flight at once
    // (a row's id loaded just before its row would wait for it, row after row).
    int64_t ids[kRows];
#pragma unroll
    for (int u = 0; u < kRows; ++u) {
      ids[u] = id(u);
    }
    const uint8_t* rows[kRows];
#pragma unroll
    for (int u = 0; u < kRows; ++u) {
      rows[u] = RowAddress(p, g, ids[u], counting, &misses);
    }
    RawVector<kVecBytes> raw[kRows][kTileVectors];
#pragma unroll
    for (int u = 0; u < kRows; ++u) {
#pragma unroll
      for (int k = 0; k < kTileVectors; ++k) {
        raw[u][k] = LoadVector<kT, kVecBytes>(rows[u], loaded[k] * kValues);
      }
    }
#pragma unroll
    for (int u = 0; u < kRows; ++u) {
      RowScale s{0.0f, 0.0f};
      if constexpr (IsQuantized(kT)) {
        s = LoadScale<kT>(rows[u], p.dim);
      }
      const float w = weight(u);
#pragma unroll
      for (int k = 0; k < kTileVectors; ++k) {
        float x[kValues];
        Decode<kT, kVecBytes>(raw[u][k], loaded[k] * kValues, s, x);
#pragma unroll
        for (int i = 0; i < kValues; ++i) {
          acc[k][i] = __fadd_rn(acc[k][i], weighted ? __fmul_rn(w, x[i]) : x[i]);
        }
      }
    }
  };
  if (kStage && g.group >= kUnroll) {
    // The group's lanes load the bag's ids and weights `group` at a time, one each (one
    // coalesced load), and each row's id comes from its lane by a shuffle: no id load waits in
    // front of each run of row loads. All the group's lanes run the same trips, so the shuffles
    // see all of them.
    const unsigned group_mask = g.group == 32 ? 0xffffffffu
                                              : ((1u << g.group) - 1u)
                                                    << ((threadIdx.x % 32) & ~(g.group - 1));
    for (int64_t base = begin; base < end;) {
      const int n = static_cast<int>(end - base < g.group ? end - base : g.group);
      const long long my_id = lane < n ? __ldg(p.ids + base + lane) : 0;
      const float my_weight = weighted && lane < n ? __ldg(p.weights + base + lane) : 1.0f;
      int u = 0;
      for (; u + kUnroll <= n; u += kUnroll) {
        add_rows(
            std::integral_constant<int, kUnroll>{},
            [&](int r) {
              return static_cast<int64_t>(__shfl_sync(group_mask, my_id, u + r, g.group));
            },
            [&](int r) {
              return weighted ? __shfl_sync(group_mask, my_weight, u + r, g.group) : 1.0f;
            });
      }
      for (; u < n; ++u) {
        add_rows(
            std::integral_constant<int, 1>{},
            [&](int) { return static_cast<int64_t>(__shfl_sync(group_mask, my_id, u, g.group)); },
            [&](int) { return weighted ? __shfl_sync(group_mask, my_weight, u, g.group) : 1.0f; });
      }
      base += n;
    }
  } else {
    auto id = [&](int64_t j) { return [&p, j](int u) { return __ldg(p.ids + j + u); }; };
    auto weight = [&](int64_t j) {
      return [&p, j, weighted](int u) { return weighted ? __ldg(p.weights + j + u) : 1.0f; };
    };
    int64_t j = begin;
    for (; j + kUnroll <= end; j += kUnroll) {
      add_rows(std::integral_constant<int, kUnroll>{}, id(j), weight(j));
    }
    for (; j < end; ++j) {
      add_rows(std::integral_constant<int, 1>{}, id(j), weight(j));
    }
  }
  const bool scaled = p.scales != nullptr;
  const float scale = scaled ? __ldg(p.scales + bag) : 1.0f;
  void* out_row = static_cast<unsigned char*>(p.out) +
                  static_cast<size_t>(bag) * static_cast<size_t>(p.dim) * ElementSize(p.out_type);
#pragma unroll
  for (int k = 0; k < kTileVectors; ++k) {
    const int64_t v = first_vector + static_cast<int64_t>(k) * g.group;
    if (v < g.vectors) {
      if (scaled) {
#pragma unroll
        for (int i = 0; i < kValues; ++i) {
          acc[k][i] = __fmul_rn(acc[k][i], scale);
        }
      }
      StoreOut<kValues>(out_row, p.out_type, v * kValues, acc[k]);
    }
  }
  return misses;
}

// A gather (no offsets, weights or scales): a group owns kRows consecutive ids and a column
// tile, loads all of their rows before it converts any (kRows rows' misses in flight, where a bag
// of one id would have one), and writes each row's tile to its own answer row, each element
// rounded once (CpuGather's results, -0.0 kept). Returns the host rows read, as PoolItem.
template <DataType kT, int kVecBytes, int kTileVectors, int kRows>
__device__ __forceinline__ unsigned GatherItem(const DeviceBags& p, const BagGrid& g, int64_t item,
                                               int lane) {
  constexpr int kValues = kValuesPerVector<kT, kVecBytes>;
  const int64_t block = g.tiles == 1 ? item : item / g.tiles;  // a 64-bit divide only if needed
  const int64_t first = block * kRows;
  const int64_t tile = item - block * g.tiles;
  const int64_t first_vector = tile * g.group * kTileVectors + lane;
  const bool counting = tile == 0 && lane == 0;
  unsigned misses = 0;
  // Every load of every row first, a quantized row's scale and bias with its values: the stores
  // below may alias the table as far as the compiler knows, so a load left until after a store
  // would wait for it, one row's latency after another.
  // The ids, then the rows' addresses (a host tier's slots), then the rows, each step's loads all
  // in flight at once: a row's id loaded just before its row would wait for it, row after row.
  // Past the last id, row 0 stands in (read, never written).
  int64_t ids[kRows];
#pragma unroll
  for (int u = 0; u < kRows; ++u) {
    ids[u] = first + u < p.num_bags ? __ldg(p.ids + first + u) : 0;
  }
  const uint8_t* addresses[kRows];
#pragma unroll
  for (int u = 0; u < kRows; ++u) {
    addresses[u] = RowAddress(p, g, ids[u], counting && first + u < p.num_bags, &misses);
  }
  RawVector<kVecBytes> raw[kRows][kTileVectors];
  RowScale scales[kRows];
#pragma unroll
  for (int u = 0; u < kRows; ++u) {
    if (first + u < p.num_bags) {
      const uint8_t* row = addresses[u];
#pragma unroll
      for (int k = 0; k < kTileVectors; ++k) {
        const int64_t v = first_vector + static_cast<int64_t>(k) * g.group;
        if (v < g.vectors) {
          raw[u][k] = LoadVector<kT, kVecBytes>(row, v * kValues);
        }
      }
      if constexpr (IsQuantized(kT)) {
        scales[u] = LoadScale<kT>(row, p.dim);
      }
    }
  }
  const size_t out_row_bytes = static_cast<size_t>(p.dim) * ElementSize(p.out_type);
#pragma unroll
  for (int u = 0; u < kRows; ++u) {
    if (first + u < p.num_bags) {
      const RowScale s = IsQuantized(kT) ? scales[u] : RowScale{0.0f, 0.0f};
      void* out_row =
          static_cast<unsigned char*>(p.out) + static_cast<size_t>(first + u) * out_row_bytes;
#pragma unroll
      for (int k = 0; k < kTileVectors; ++k) {
        const int64_t v = first_vector + static_cast<int64_t>(k) * g.group;
        if (v < g.vectors) {
          float x[kValues];
          Decode<kT, kVecBytes>(raw[u][k], v * kValues, s, x);
          StoreOut<kValues>(out_row, p.out_type, v * kValues, x);
        }
      }
    }
  }
  return misses;
}

template <DataType kT, int kVecBytes, int kTileVectors, int kRows>
__global__ void __launch_bounds__(kBlockThreads, kGatherMinBlocks)
    GatherKernel(const DeviceBags p, const BagGrid g) {
  const int64_t thread = static_cast<int64_t>(blockIdx.x) * kBlockThreads + threadIdx.x;
  const int64_t item = thread >> (__ffs(g.group) - 1);  // g.group is a power of two
  const int lane = static_cast<int>(thread & (g.group - 1));
  unsigned misses = 0;
  if (item < (p.num_bags + kRows - 1) / kRows * g.tiles) {
    misses = GatherItem<kT, kVecBytes, kTileVectors, kRows>(p, g, item, lane);
  }
  if (p.cached.misses != nullptr) {  // the same for every thread: all reach the barriers
    CountMisses(p.cached.misses, misses);
  }
}

// kStage: whether a group stages its bag's ids (kStageIds, for bags of kShortBagIds or more);
// kMinBlocks: the bound on registers (kBagMinBlocks, or kShortMinBlocks for short bags).
template <DataType kT, int kVecBytes, int kTileVectors, int kUnroll, bool kStage, int kMinBlocks>
__global__ void __launch_bounds__(kBlockThreads, kMinBlocks)
    BagKernel(const DeviceBags p, const BagGrid g) {
  const int64_t thread = static_cast<int64_t>(blockIdx.x) * kBlockThreads + threadIdx.x;
  const int64_t item = thread >> (__ffs(g.group) - 1);  // g.group is a power of two
  const int lane = static_cast<int>(thread & (g.group - 1));
  unsigned misses = 0;
  if (item < p.num_bags * g.tiles) {
    misses = PoolItem<kT, kVecBytes, kTileVectors, kUnroll, kStage>(p, g, item, lane);
  }
  if (p.cached.misses != nullptr) {  // the same for every thread: all reach the barriers
    CountMisses(p.cached.misses, misses);
  }
}

}  // namespace emb::kernels::bags

#endif  // EMB_KERNELS_BAGS_BAG_KERNEL_CUH_
