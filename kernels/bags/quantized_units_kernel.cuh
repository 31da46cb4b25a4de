// QuantizedUnitsKernel: the plain gather (bags of one id, unweighted) of a row-wise quantized
// table, laid out as the float gather's units kernel (kernels/gather/units_kernel.cuh) is. Private
// to kernels/; bag_launch.cu launches it where QuantizedUnitsFit says it may.
//
// The answer is a flat array of 16-byte units (4 float32 or 8 half/bfloat16 values); thread t of
// a block owns units t, t + 256, ... of its tile. For each unit it loads the row's id, then the
// unit's levels (4 or 8 bytes of int8, half that of int4) and the row's scale and bias, all of its
// kUnroll units' loads before it converts any; then dequantizes each value (scale * q + bias, each
// rounded once: CpuGather's results), rounds it to the answer type and stores the unit. Stores are
// fully coalesced whatever the row length, and a thread holds a few registers a unit, so many
// warps keep loads in flight (GatherKernel's group-per-row layout held 128 registers a thread at
// 22% occupancy and issued ~22 instructions an element).
#ifndef EMB_KERNELS_BAGS_QUANTIZED_UNITS_KERNEL_CUH_
#define EMB_KERNELS_BAGS_QUANTIZED_UNITS_KERNEL_CUH_

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "kernels/bags/bag_kernel.cuh"
#include "kernels/data_type.h"
#include "kernels/gather/fast_divmod.cuh"
#include "kernels/lookup_problem.h"
#include "kernels/quantize.h"

namespace emb::kernels::bags {

// Units in flight per thread. Builds for benchmarks may set others (-DEMB_QUNITS_UNROLL=N).
#ifndef EMB_QUNITS_UNROLL
#define EMB_QUNITS_UNROLL 4
#endif
inline constexpr int kQuantizedUnroll = EMB_QUNITS_UNROLL;
// Whether answer stores are evict-first (st.global.cs), as the float gather's rule has them.
// Builds for benchmarks may set -DEMB_QUNITS_STREAMING=1.
#ifndef EMB_QUNITS_STREAMING
#define EMB_QUNITS_STREAMING 0
#endif

// Values of answer type `out` in one 16-byte unit.
__host__ __device__ constexpr int UnitValues(DataType out) {
  return out == DataType::kFloat32 ? 4 : 8;
}

// The launch's constants besides LookupProblem.
struct QuantizedGrid {
  gather::FastDivmod units_per_row;  // dim / UnitValues(out)
  uint32_t total_units;              // num_bags * units_per_row, < 2^31
  size_t row_bytes;                  // of the table
};

// The levels of one unit as loaded: kValues int8 levels or kValues / 2 bytes of int4 nibbles.
template <DataType kT, int kValues>
using LevelBits = std::conditional_t<
    (kT == DataType::kInt8Rowwise ? kValues : kValues / 2) == 8, uint2,
    std::conditional_t<(kT == DataType::kInt8Rowwise ? kValues : kValues / 2) == 4, unsigned int,
                       unsigned short>>;

// Level i of a unit (the float bits 2^23 + q, for LevelAsFloat).
template <DataType kT, int kValues>
__device__ __forceinline__ unsigned int LevelBitsAt(const LevelBits<kT, kValues>& v, int i) {
  if constexpr (kT == DataType::kInt8Rowwise) {
    unsigned int word;
    if constexpr (kValues == 8) {
      word = i < 4 ? v.x : v.y;
    } else {
      word = v;
    }
    return __byte_perm(word, 0x4b000000u, 0x7440u + (i & 3));
  } else {
    const unsigned int word = v;  // 8 nibbles at most, value i at bits 4i..4i+3
    return 0x4b000000u | ((word >> (4 * i)) & 0xfu);
  }
}

// The answer unit of kValues dequantized values x, rounded to kOut. A finite scale and bias give
// no NaN, so the hardware's paired conversion rounds as FloatToHalf / FloatToBFloat16 do;
// otherwise each value takes their NaN payload.
template <DataType kOut, int kValues>
__device__ __forceinline__ uint4 PackUnit(const float (&x)[kValues], bool finite) {
  uint4 u;
  unsigned int* w = &u.x;
  if constexpr (kOut == DataType::kFloat32) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      w[i] = __float_as_uint(x[i]);
    }
  } else if (finite) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      if constexpr (kOut == DataType::kFloat16) {
        asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(w[i]) : "f"(x[2 * i + 1]), "f"(x[2 * i]));
      } else {
        asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(w[i]) : "f"(x[2 * i + 1]), "f"(x[2 * i]));
      }
    }
  } else {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const auto narrow = [](float f) -> unsigned int {
        return kOut == DataType::kFloat16 ? FloatToHalf(f) : FloatToBFloat16(f);
      };
      w[i] = narrow(x[2 * i]) | (narrow(x[2 * i + 1]) << 16);
    }
  }
  return u;
}

template <DataType kT, DataType kOut, int kUnroll>
__global__ void __launch_bounds__(kBlockThreads)
    QuantizedUnitsKernel(const LookupProblem p, const QuantizedGrid q) {
  constexpr int kValues = UnitValues(kOut);
  constexpr int kLevelBytes = kT == DataType::kInt8Rowwise ? kValues : kValues / 2;
  using Levels = LevelBits<kT, kValues>;
  const BagGrid g{0, 0, 0, q.row_bytes};
  const uint32_t first = blockIdx.x * (kBlockThreads * kUnroll) + threadIdx.x;
  const uint32_t per_row = q.units_per_row.divisor;
  unsigned misses = 0;

  // The ids, then the rows' addresses (a host tier's slots), then the levels and scales: each
  // step's loads all in flight at once.
  int64_t ids[kUnroll];
  uint32_t cols[kUnroll];
#pragma unroll
  for (int k = 0; k < kUnroll; ++k) {
    const uint32_t c = first + k * kBlockThreads;
    const uint32_t row = q.units_per_row.Div(c);
    cols[k] = c - row * per_row;
    ids[k] = c < q.total_units ? __ldg(p.ids + row) : 0;  // past the end, row 0 stands in
  }
  const uint8_t* rows[kUnroll];
#pragma unroll
  for (int k = 0; k < kUnroll; ++k) {
    const bool counting = cols[k] == 0 && first + k * kBlockThreads < q.total_units;
    rows[k] = RowAddress(p, g, ids[k], counting, &misses);
  }
  Levels levels[kUnroll];
  RowScale scales[kUnroll];
#pragma unroll
  for (int k = 0; k < kUnroll; ++k) {
    levels[k] = __ldg(reinterpret_cast<const Levels*>(rows[k] + cols[k] * kLevelBytes));
    scales[k] = LoadScale<kT>(rows[k], p.dim);
  }
#pragma unroll
  for (int k = 0; k < kUnroll; ++k) {
    const uint32_t c = first + k * kBlockThreads;
    if (c < q.total_units) {
      const RowScale s = scales[k];
      float x[kValues];
#pragma unroll
      for (int i = 0; i < kValues; ++i) {
        x[i] =
            DequantizeValue(LevelAsFloat(LevelBitsAt<kT, kValues>(levels[k], i)), s.scale, s.bias);
      }
      const bool finite = isfinite(s.scale) && isfinite(s.bias);
      uint4* out = static_cast<uint4*>(p.out) + c;
      if (EMB_QUNITS_STREAMING != 0) {
        __stcs(out, PackUnit<kOut, kValues>(x, finite));
      } else {
        *out = PackUnit<kOut, kValues>(x, finite);
      }
    }
  }
  if (p.cached.misses != nullptr) {  // the same for every thread: all reach the barriers
    CountMisses(p.cached.misses, misses);
  }
}

// Whether QuantizedUnitsKernel serves `p`, a gather of a quantized table: every unit's levels
// and every row's scale aligned for their loads, the answer for 16-byte stores, and the units
// countable in 31 bits.
inline bool QuantizedUnitsFit(const LookupProblem& p) {
  const int values = UnitValues(p.out_type);
  if (p.dim % 8 != 0 || p.dim % values != 0) {
    return false;  // dim % 8: int8 rows of dim + 8 bytes, int4 of dim / 2 + 4, scales aligned
  }
  const uintptr_t tables =
      reinterpret_cast<uintptr_t>(p.table) | reinterpret_cast<uintptr_t>(p.cached.cache);
  const uint64_t units = static_cast<uint64_t>(p.num_bags) * static_cast<uint64_t>(p.dim / values);
  constexpr uint64_t kTile = kBlockThreads * kQuantizedUnroll;  // the last tile's units too
  return tables % 8 == 0 && reinterpret_cast<uintptr_t>(p.out) % 16 == 0 &&
         units + kTile < (uint64_t{1} << 31);
}

template <DataType kT, DataType kOut>
cudaError_t LaunchQuantizedUnits(const LookupProblem& p, cudaStream_t stream) {
  QuantizedGrid q;
  const auto per_row = static_cast<uint32_t>(p.dim / UnitValues(kOut));
  q.units_per_row = gather::FastDivmod::Make(per_row);
  q.total_units = static_cast<uint32_t>(p.num_bags) * per_row;
  q.row_bytes = RowBytes(kT, p.dim);
  constexpr uint32_t kTile = kBlockThreads * kQuantizedUnroll;
  const uint32_t blocks = (q.total_units + kTile - 1) / kTile;
  QuantizedUnitsKernel<kT, kOut, kQuantizedUnroll><<<blocks, kBlockThreads, 0, stream>>>(p, q);
  return cudaPeekAtLastError();
}

// LaunchQuantizedUnits for p.out_type.
template <DataType kT>
cudaError_t LaunchQuantizedUnits(const LookupProblem& p, cudaStream_t stream) {
  switch (p.out_type) {
    case DataType::kFloat32:
      return LaunchQuantizedUnits<kT, DataType::kFloat32>(p, stream);
    case DataType::kFloat16:
      return LaunchQuantizedUnits<kT, DataType::kFloat16>(p, stream);
    case DataType::kBFloat16:
      return LaunchQuantizedUnits<kT, DataType::kBFloat16>(p, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace emb::kernels::bags

#endif  // EMB_KERNELS_BAGS_QUANTIZED_UNITS_KERNEL_CUH_
