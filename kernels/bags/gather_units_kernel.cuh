// GatherUnitsKernel: the plain gather (bags of one id, unweighted) of a row-wise quantized table,
// or of a float table in two tiers (a host tier: each row from the GPU cache or the mapped host
// rows), laid out as the float gather's units kernel (kernels/gather/units_kernel.cuh) is.
// Private to kernels/; bag_launch.cu launches it where GatherUnitsFit says it may.
//
// The answer is a flat array of 16-byte units (4 float32 or 8 half/bfloat16 values); thread t of
// a block owns units t, t + 256, ... of its tile. For each unit it loads the row's id, then the
// row's address (a host tier's slot), then the unit's elements (a quantized row's levels with its
// scale and bias), all of its kUnroll units' loads before it converts any; then converts each
// value (a level: scale * q + bias, each rounded once; CpuGather's results), rounds it to the
// answer type and stores the unit. Stores are fully coalesced whatever the row length, and a
// thread holds a few registers a unit, so many warps keep loads in flight: GatherKernel's
// group-per-row layout held 128 registers a thread at 22% occupancy, which for a host tier's
// misses (random rows read over PCIe, each a long wait) left the link idle.
#ifndef EMB_KERNELS_BAGS_GATHER_UNITS_KERNEL_CUH_
#define EMB_KERNELS_BAGS_GATHER_UNITS_KERNEL_CUH_

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/bags/bag_kernel.cuh"
#include "kernels/data_type.h"
#include "kernels/device_bags.h"
#include "kernels/gather/fast_divmod.cuh"
#include "kernels/quantize.h"

namespace emb::kernels::bags {

// Units in flight per thread. Builds for benchmarks may set others (-DEMB_QUNITS_UNROLL=N).
#ifndef EMB_QUNITS_UNROLL
#define EMB_QUNITS_UNROLL 4
#endif
inline constexpr int kUnitsUnroll = EMB_QUNITS_UNROLL;
// Whether answer stores are evict-first (st.global.cs), as the float gather's rule has them.
// Builds for benchmarks may set -DEMB_QUNITS_STREAMING=1.
#ifndef EMB_QUNITS_STREAMING
#define EMB_QUNITS_STREAMING 0
#endif

// Values of answer type `out` in one 16-byte unit.
__host__ __device__ constexpr int UnitValues(DataType out) {
  return out == DataType::kFloat32 ? 4 : 8;
}

// Bytes of the table's elements behind one unit of answer type kOut: 2 to 32.
template <DataType kT, DataType kOut>
inline constexpr int kUnitBytes = kT == DataType::kInt8Rowwise ? UnitValues(kOut)
                                  : kT == DataType::kInt4Rowwise
                                      ? UnitValues(kOut) / 2
                                      : UnitValues(kOut) * static_cast<int>(ElementSize(kT));

// One unit's elements as loaded (one load of up to 16 bytes, two of 32), as 32-bit words.
template <int kBytes>
struct UnitBits {
  static constexpr int kWords = (kBytes + 3) / 4;
  unsigned int w[kWords];
};

template <int kBytes>
__device__ __forceinline__ UnitBits<kBytes> LoadUnit(const uint8_t* at) {
  UnitBits<kBytes> u{};
  if constexpr (kBytes == 32) {
    const uint4 lo = __ldg(reinterpret_cast<const uint4*>(at));
    const uint4 hi = __ldg(reinterpret_cast<const uint4*>(at) + 1);
    memcpy(u.w, &lo, 16);
    memcpy(u.w + 4, &hi, 16);
  } else {
    using Raw = typename RawType<kBytes>::type;
    const Raw raw = __ldg(reinterpret_cast<const Raw*>(at));
    memcpy(u.w, &raw, kBytes);
  }
  return u;
}

// Value i of a unit of a table of type kT, as float (a level dequantized with `s`).
template <DataType kT, int kBytes>
__device__ __forceinline__ float UnitValue(const UnitBits<kBytes>& u, int i, RowScale s) {
  if constexpr (kT == DataType::kFloat32) {
    return __uint_as_float(u.w[i]);
  } else if constexpr (kT == DataType::kFloat16 || kT == DataType::kBFloat16) {
    const auto h = static_cast<uint16_t>(u.w[i / 2] >> (16 * (i & 1)));
    return kT == DataType::kFloat16 ? HalfToFloat(h) : BFloat16ToFloat(h);
  } else if constexpr (kT == DataType::kInt8Rowwise) {
    // A level q becomes 2^23 + q under a float's exponent (one byte permute), less 2^23: exact.
    return DequantizeValue(LevelAsFloat(__byte_perm(u.w[i / 4], 0x4b000000u, 0x7440u + (i & 3))),
                           s.scale, s.bias);
  } else {  // int4: value i at bits 4i..4i+3
    return DequantizeValue(LevelAsFloat(0x4b000000u | ((u.w[i / 8] >> (4 * (i & 7))) & 0xfu)),
                           s.scale, s.bias);
  }
}

// The launch's constants besides DeviceBags.
struct UnitsGrid {
  gather::FastDivmod units_per_row;  // dim / UnitValues(out)
  uint32_t total_units;              // num_bags * units_per_row, < 2^31
  size_t row_bytes;                  // of the table
};

// The answer unit of kValues values x, rounded to kOut. Where no value is NaN (`finite`: a
// quantized row's finite scale and bias, or a float row's values checked) the hardware's paired
// conversion rounds as FloatToHalf / FloatToBFloat16 do; otherwise each value takes their NaN
// payload.
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
    GatherUnitsKernel(const DeviceBags p, const UnitsGrid q) {
  constexpr int kValues = UnitValues(kOut);
  constexpr int kBytes = kUnitBytes<kT, kOut>;
  const BagGrid g{0, 0, 0, q.row_bytes, false};
  const uint32_t first = blockIdx.x * (kBlockThreads * kUnroll) + threadIdx.x;
  const uint32_t per_row = q.units_per_row.divisor;
  unsigned misses = 0;

  // The ids, then the rows' addresses (a host tier's slots), then the units (and a quantized
  // row's scale and bias): each step's loads all in flight at once.
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
  UnitBits<kBytes> units[kUnroll];
  RowScale scales[kUnroll];
#pragma unroll
  for (int k = 0; k < kUnroll; ++k) {
    units[k] = LoadUnit<kBytes>(rows[k] + static_cast<size_t>(cols[k]) * kBytes);
    if constexpr (IsQuantized(kT)) {
      scales[k] = LoadScale<kT>(rows[k], p.dim);
    } else {
      scales[k] = RowScale{0.0f, 0.0f};
    }
  }
#pragma unroll
  for (int k = 0; k < kUnroll; ++k) {
    const uint32_t c = first + k * kBlockThreads;
    if (c < q.total_units) {
      uint4 unit;
      if constexpr (kT == kOut) {  // the row's own bits (CpuGather copies them)
        memcpy(&unit, units[k].w, 16);
      } else {
        float x[kValues];
        bool finite = true;
#pragma unroll
        for (int i = 0; i < kValues; ++i) {
          x[i] = UnitValue<kT, kBytes>(units[k], i, scales[k]);
          if constexpr (!IsQuantized(kT)) {
            finite &= x[i] == x[i];
          }
        }
        if constexpr (IsQuantized(kT)) {
          finite = isfinite(scales[k].scale) && isfinite(scales[k].bias);
        }
        unit = PackUnit<kOut, kValues>(x, finite);
      }
      uint4* out = static_cast<uint4*>(p.out) + c;
      if (EMB_QUNITS_STREAMING != 0) {
        __stcs(out, unit);
      } else {
        *out = unit;
      }
    }
  }
  if (p.cached.misses != nullptr) {  // the same for every thread: all reach the barriers
    CountMisses(p.cached.misses, misses);
  }
}

// Whether GatherUnitsKernel serves `p`, a gather: of a quantized table (every unit's levels and
// every row's scale aligned for their loads), or of a float table in two tiers whose rows split
// into whole units aligned for their loads; the answer aligned for 16-byte stores, and the units
// countable in 31 bits. (A float table in GPU memory alone is the float gather's:
// kernels/embedding_lookup.h.)
inline bool GatherUnitsFit(const DeviceBags& p) {
  const int values = UnitValues(p.out_type);
  const uintptr_t tables =
      reinterpret_cast<uintptr_t>(p.table) | reinterpret_cast<uintptr_t>(p.cached.cache);
  if (IsQuantized(p.table_type)) {
    // dim % 8: int8 rows of dim + 8 bytes, int4 of dim / 2 + 4, scales aligned
    if (p.dim % 8 != 0 || p.dim % values != 0 || tables % 8 != 0) {
      return false;
    }
  } else {
    if (p.cached.slots == nullptr || p.dim % values != 0) {
      return false;
    }
    // A unit's elements: 8, 16 or 32 bytes, loaded 8 or 16 at a time; rows start aligned to it.
    const size_t load = std::min<size_t>(16, values * ElementSize(p.table_type));
    if (tables % load != 0 || RowBytes(p.table_type, p.dim) % load != 0) {
      return false;
    }
  }
  const uint64_t units = static_cast<uint64_t>(p.num_bags) * static_cast<uint64_t>(p.dim / values);
  constexpr uint64_t kTile = kBlockThreads * kUnitsUnroll;  // the last tile's units too
  return reinterpret_cast<uintptr_t>(p.out) % 16 == 0 && units + kTile < (uint64_t{1} << 31);
}

template <DataType kT, DataType kOut>
cudaError_t LaunchGatherUnits(const DeviceBags& p, cudaStream_t stream) {
  UnitsGrid q;
  const auto per_row = static_cast<uint32_t>(p.dim / UnitValues(kOut));
  q.units_per_row = gather::FastDivmod::Make(per_row);
  q.total_units = static_cast<uint32_t>(p.num_bags) * per_row;
  q.row_bytes = RowBytes(kT, p.dim);
  constexpr uint32_t kTile = kBlockThreads * kUnitsUnroll;
  const uint32_t blocks = (q.total_units + kTile - 1) / kTile;
  GatherUnitsKernel<kT, kOut, kUnitsUnroll><<<blocks, kBlockThreads, 0, stream>>>(p, q);
  return cudaPeekAtLastError();
}

// LaunchGatherUnits for p.out_type.
template <DataType kT>
cudaError_t LaunchGatherUnits(const DeviceBags& p, cudaStream_t stream) {
  switch (p.out_type) {
    case DataType::kFloat32:
      return LaunchGatherUnits<kT, DataType::kFloat32>(p, stream);
    case DataType::kFloat16:
      return LaunchGatherUnits<kT, DataType::kFloat16>(p, stream);
    case DataType::kBFloat16:
      return LaunchGatherUnits<kT, DataType::kBFloat16>(p, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace emb::kernels::bags

#endif  // EMB_KERNELS_BAGS_GATHER_UNITS_KERNEL_CUH_
