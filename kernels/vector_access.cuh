// Vec<kBytes>::Type: the register type of one memory access of kBytes (1, 2, 4, 8 or 16), shared
// by the gather and bag kernels. Private to kernels/; device code only.
#ifndef EMB_KERNELS_VECTOR_ACCESS_CUH_
#define EMB_KERNELS_VECTOR_ACCESS_CUH_

#include <cuda_runtime.h>

namespace emb::kernels {

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
template <>
struct Vec<1> {
  using Type = unsigned char;
};

}  // namespace emb::kernels

#endif  // EMB_KERNELS_VECTOR_ACCESS_CUH_
