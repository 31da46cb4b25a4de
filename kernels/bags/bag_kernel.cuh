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

// What the launcher chose for a launch.
struct BagGrid {
  int group;         // lanes per (bag, tile)
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
#pragma unroll
    for (int i = 0; i < kValues; ++i) {
      x[i] = DequantizeValue(static_cast<float>(v.b[i]), s.scale, s.bias);
    }
  } else if constexpr (kVecBytes == 0) {  // one int4 element
    x[0] = DequantizeValue(static_cast<float>((v.b[0] >> (4 * (col & 1))) & 0xfu), s.scale, s.bias);
  } else {
#pragma unroll
    for (int i = 0; i < kValues; ++i) {
      x[i] = DequantizeValue(static_cast<float>((v.b[i / 2] >> (4 * (i & 1))) & 0xfu), s.scale,
                             s.bias);
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
#pragma unroll
    for (int i = 0; i < kValues; ++i) {
      h[i] = t == DataType::kFloat16 ? FloatToHalf(x[i]) : FloatToBFloat16(x[i]);
    }
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
template <DataType kT, int kVecBytes, int kTileVectors, int kUnroll>
__device__ __forceinline__ unsigned PoolItem(const DeviceBags& p, const BagGrid& g, int64_t item,
                                             int lane) {
  constexpr int kValues = kValuesPerVector<kT, kVecBytes>;
  const int64_t bag = item / g.tiles;
  const int64_t tile = item % g.tiles;
  const int64_t first_vector = tile * g.group * kTileVectors + lane;
  const int64_t begin = p.offsets != nullptr ? p.offsets[bag] : bag;
  const int64_t end = p.offsets != nullptr ? p.offsets[bag + 1] : bag + 1;
  const bool weighted = p.weights != nullptr;
  const bool counting = tile == 0 && lane == 0;
  unsigned misses = 0;

  float acc[kTileVectors][kValues];
#pragma unroll
  for (int k = 0; k < kTileVectors; ++k) {
#pragma unroll
    for (int i = 0; i < kValues; ++i) {
      acc[k][i] = 0.0f;
    }
  }
  // Adds rows [j, j + kRows) of the bag: every load first, then the sums in id order.
  auto add_rows = [&](int64_t j, auto rows_constant) {
    constexpr int kRows = decltype(rows_constant)::value;
    const uint8_t* rows[kRows];
    RawVector<kVecBytes> raw[kRows][kTileVectors];
#pragma unroll
    for (int u = 0; u < kRows; ++u) {
      rows[u] = RowAddress(p, g, __ldg(p.ids + j + u), counting, &misses);
#pragma unroll
      for (int k = 0; k < kTileVectors; ++k) {
        const int64_t v = first_vector + static_cast<int64_t>(k) * g.group;
        if (v < g.vectors) {
          raw[u][k] = LoadVector<kT, kVecBytes>(rows[u], v * kValues);
        }
      }
    }
#pragma unroll
    for (int u = 0; u < kRows; ++u) {
      RowScale s{0.0f, 0.0f};
      if constexpr (IsQuantized(kT)) {
        s = LoadScale<kT>(rows[u], p.dim);
      }
      const float w = weighted ? __ldg(p.weights + j + u) : 1.0f;
#pragma unroll
      for (int k = 0; k < kTileVectors; ++k) {
        const int64_t v = first_vector + static_cast<int64_t>(k) * g.group;
        if (v < g.vectors) {
          float x[kValues];
          Decode<kT, kVecBytes>(raw[u][k], v * kValues, s, x);
#pragma unroll
          for (int i = 0; i < kValues; ++i) {
            acc[k][i] = __fadd_rn(acc[k][i], weighted ? __fmul_rn(w, x[i]) : x[i]);
          }
        }
      }
    }
  };
  int64_t j = begin;
  for (; j + kUnroll <= end; j += kUnroll) {
    add_rows(j, std::integral_constant<int, kUnroll>{});
  }
  for (; j < end; ++j) {
    add_rows(j, std::integral_constant<int, 1>{});
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
  const int64_t first = (item / g.tiles) * kRows;
  const int64_t tile = item % g.tiles;
  const int64_t first_vector = tile * g.group * kTileVectors + lane;
  const bool counting = tile == 0 && lane == 0;
  unsigned misses = 0;
  const uint8_t* rows[kRows];
  RawVector<kVecBytes> raw[kRows][kTileVectors];
#pragma unroll
  for (int u = 0; u < kRows; ++u) {
    if (first + u < p.num_bags) {
      rows[u] = RowAddress(p, g, __ldg(p.ids + first + u), counting, &misses);
#pragma unroll
      for (int k = 0; k < kTileVectors; ++k) {
        const int64_t v = first_vector + static_cast<int64_t>(k) * g.group;
        if (v < g.vectors) {
          raw[u][k] = LoadVector<kT, kVecBytes>(rows[u], v * kValues);
        }
      }
    }
  }
  const size_t out_row_bytes = static_cast<size_t>(p.dim) * ElementSize(p.out_type);
#pragma unroll
  for (int u = 0; u < kRows; ++u) {
    if (first + u < p.num_bags) {
      RowScale s{0.0f, 0.0f};
      if constexpr (IsQuantized(kT)) {
        s = LoadScale<kT>(rows[u], p.dim);
      }
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
__global__ void __launch_bounds__(kBlockThreads) GatherKernel(const DeviceBags p, const BagGrid g) {
  const int64_t thread = static_cast<int64_t>(blockIdx.x) * kBlockThreads + threadIdx.x;
  const int64_t item = thread / g.group;
  const int lane = static_cast<int>(thread % g.group);
  unsigned misses = 0;
  if (item < (p.num_bags + kRows - 1) / kRows * g.tiles) {
    misses = GatherItem<kT, kVecBytes, kTileVectors, kRows>(p, g, item, lane);
  }
  if (p.cached.misses != nullptr) {  // the same for every thread: all reach the barriers
    CountMisses(p.cached.misses, misses);
  }
}

template <DataType kT, int kVecBytes, int kTileVectors, int kUnroll>
__global__ void __launch_bounds__(kBlockThreads) BagKernel(const DeviceBags p, const BagGrid g) {
  const int64_t thread = static_cast<int64_t>(blockIdx.x) * kBlockThreads + threadIdx.x;
  const int64_t item = thread / g.group;
  const int lane = static_cast<int>(thread % g.group);
  unsigned misses = 0;
  if (item < p.num_bags * g.tiles) {
    misses = PoolItem<kT, kVecBytes, kTileVectors, kUnroll>(p, g, item, lane);
  }
  if (p.cached.misses != nullptr) {  // the same for every thread: all reach the barriers
    CountMisses(p.cached.misses, misses);
  }
}

}  // namespace emb::kernels::bags

#endif  // EMB_KERNELS_BAGS_BAG_KERNEL_CUH_
