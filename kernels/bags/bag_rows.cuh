// The bag kernels' row access (kernels/bags/bag_kernel.cuh, kernels/features/): the widest vector
// a table's rows allow, vector loads of a row of any table type, its scale, decoding to float32,
// stores of the answer's type, the address of a row in one or two tiers, and the count of host
// rows read. Private to kernels/.
#ifndef EMB_KERNELS_BAGS_BAG_ROWS_CUH_
#define EMB_KERNELS_BAGS_BAG_ROWS_CUH_

#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/bags/bag_tuning.cuh"
#include "kernels/data_type.h"
#include "kernels/lookup_problem.h"
#include "kernels/quantize.h"
#include "kernels/vector_access.cuh"  // Vec

namespace emb::kernels::bags {

// Elements per vector of kVecBytes bytes of a row of type kT; kVecBytes 0 means one element
// (int4 rows of odd dim).
template <DataType kT, int kVecBytes>
inline constexpr int kValuesPerVector = kT == DataType::kInt4Rowwise
                                            ? (kVecBytes == 0 ? 1 : 2 * kVecBytes)
                                        : kT == DataType::kInt8Rowwise
                                            ? kVecBytes
                                            : kVecBytes / static_cast<int>(ElementSize(kT));

// The widest load (bytes) that every vector of every row of `t` can use: the row's elements
// split into whole vectors and each row starts aligned to it (the table's address and the row's
// size are multiples of it). 0: one element at a time (int4 rows of odd dim). `address`: the
// table's, or the bitwise or of both tiers' (aligned to the less aligned of them).
__host__ __device__ inline int VectorBytes(DataType t, int64_t dim, uintptr_t address) {
  const size_t row = RowBytes(t, dim);
  const int widest = t == DataType::kInt4Rowwise ? 8 : 16;
  for (int b = widest; b >= 1; b /= 2) {
    size_t elements_bytes;  // bytes of the row's elements
    if (t == DataType::kInt4Rowwise) {
      if (dim % (2 * b) != 0) {
        continue;
      }
      elements_bytes = static_cast<size_t>(dim) / 2;
    } else if (t == DataType::kInt8Rowwise) {
      elements_bytes = static_cast<size_t>(dim);
    } else {
      if (b < static_cast<int>(ElementSize(t))) {
        break;
      }
      elements_bytes = static_cast<size_t>(dim) * ElementSize(t);
    }
    if (elements_bytes % b == 0 && row % b == 0 && address % b == 0) {
      return b;
    }
  }
  return t == DataType::kInt4Rowwise ? 0 : static_cast<int>(ElementSize(t));
}

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
  using Raw = typename Vec<kBytes>::Type;
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
__device__ __forceinline__ const uint8_t* RowAddress(const LookupProblem& p, const BagGrid& g,
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

}  // namespace emb::kernels::bags

#endif  // EMB_KERNELS_BAGS_BAG_ROWS_CUH_
