// Division by a divisor fixed at launch, without a divide instruction. Private to kernels/.
#ifndef EMB_KERNELS_GATHER_FAST_DIVMOD_CUH_
#define EMB_KERNELS_GATHER_FAST_DIVMOD_CUH_

#include <cuda_runtime.h>

#include <cstdint>

namespace emb::kernels::gather {

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

}  // namespace emb::kernels::gather

#endif  // EMB_KERNELS_GATHER_FAST_DIVMOD_CUH_
