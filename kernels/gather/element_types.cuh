// Element types of the gather kernels as the bits they are stored in, their conversions on the
// device (matching kernels/data_type.h bit for bit), and the units one access moves (Vec,
// kernels/vector_access.cuh).
// Private to kernels/; device code only.
#ifndef EMB_KERNELS_GATHER_ELEMENT_TYPES_CUH_
#define EMB_KERNELS_GATHER_ELEMENT_TYPES_CUH_

#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/data_type.h"
#include "kernels/vector_access.cuh"  // Vec

namespace emb::kernels::gather {

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

// The conversions are kernels/data_type.h's, which use the hardware's on the device (NaN keeps
// the host's payload pattern; gather_gpu_test checks them bit for bit against the host's).
__device__ __forceinline__ float ToFloat(F32, uint32_t b) { return __uint_as_float(b); }
__device__ __forceinline__ float ToFloat(BF16, uint16_t b) { return BFloat16ToFloat(b); }
__device__ __forceinline__ float ToFloat(F16, uint16_t b) { return HalfToFloat(b); }
__device__ __forceinline__ uint32_t FromFloat(F32, float f) { return __float_as_uint(f); }
__device__ __forceinline__ uint16_t FromFloat(F16, float f) { return FloatToHalf(f); }
__device__ __forceinline__ uint16_t FromFloat(BF16, float f) { return FloatToBFloat16(f); }

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

}  // namespace emb::kernels::gather

#endif  // EMB_KERNELS_GATHER_ELEMENT_TYPES_CUH_
