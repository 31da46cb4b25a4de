// What the gather launchers (gather/*_launch.cu) share: a plan's cache flags, the launch error
// check, pointer alignment, unroll levels as template arguments, and the preparation of kernels
// with dynamic shared memory. Private to kernels/; host code for nvcc: no Abseil (STYLE §1).
#ifndef EMB_KERNELS_GATHER_LAUNCH_UTIL_CUH_
#define EMB_KERNELS_GATHER_LAUNCH_UTIL_CUH_

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "kernels/gather/units_kernel.cuh"
#include "kernels/gather_plan.h"

namespace emb::kernels::gather {

static_assert(kBlockThreads == kGatherBlockThreads);
static_assert(kUnrollLevels == kGatherUnrollLevels);

// GatherArgs::flags (and the other kernels' flags) for a plan.
inline uint32_t CacheFlags(const GatherPlan& plan) {
  return (plan.streaming_stores ? kStreamingStores : 0) |
         (plan.table_evict_last ? kTableEvictLast : 0);
}

// The runtime reports a launch's error through the thread's last error. Before a launch, drop a
// stale non-sticky one left by an earlier call (which returned it already), so that it is not
// blamed on this launch; a sticky error can't be dropped and is reported after the launch.
inline void DropStaleError() { (void)cudaGetLastError(); }

// After a launch: its error, reported here once (a sticky error stays regardless).
inline cudaError_t TakeLaunchError() {
  const cudaError_t e = cudaPeekAtLastError();
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
  }
  return e;
}

inline bool IsAligned(const void* p, int bytes) {
  return reinterpret_cast<uintptr_t>(p) % static_cast<uintptr_t>(bytes) == 0;
}

// Calls f(std::integral_constant<int, level>{}) for a plan's unroll level (0 to 3), so that a
// launcher can take the level as a template argument; cudaErrorInvalidValue for another level.
template <typename F>
cudaError_t WithUnrollLevel(int level, F&& f) {
  static_assert(kUnrollLevels == 4);
  switch (level) {
    case 0:
      return f(std::integral_constant<int, 0>{});
    case 1:
      return f(std::integral_constant<int, 1>{});
    case 2:
      return f(std::integral_constant<int, 2>{});
    case 3:
      return f(std::integral_constant<int, 3>{});
  }
  return cudaErrorInvalidValue;
}

// Prepares `kernel` for launches with `dyn_bytes` of dynamic shared memory on the current device
// (raising its limit to the device's opt-in maximum, once) and writes its resident blocks per
// multiprocessor: at least 1, else cudaErrorInvalidConfiguration. Cached per device, kernel and
// size (a process sees few), under a lock.
cudaError_t PrepareSmemKernel(const void* kernel, int threads, int64_t dyn_bytes, int optin_bytes,
                              int* blocks_per_sm);

}  // namespace emb::kernels::gather

#endif  // EMB_KERNELS_GATHER_LAUNCH_UTIL_CUH_
