// PrepareSmemKernel (launch_util.cuh). No Abseil here (STYLE §1).
#include <cstdint>
#include <mutex>
#include <vector>

#include "kernels/gather/launch_util.cuh"

namespace emb::kernels::gather {

cudaError_t PrepareSmemKernel(const void* kernel, int threads, int64_t dyn_bytes, int optin_bytes,
                              int* blocks_per_sm) {
  struct Entry {
    int device;
    const void* kernel;
    int64_t dyn_bytes;
    int blocks;
  };
  static std::mutex mu;
  static auto* cache = new std::vector<Entry>;  // never destroyed: used at any exit order
  int device = 0;
  if (const cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) {
    return e;
  }
  std::lock_guard<std::mutex> lock(mu);
  bool raised = false;  // any entry of this kernel on this device means its limit was raised
  for (const Entry& entry : *cache) {
    if (entry.device == device && entry.kernel == kernel) {
      if (entry.dyn_bytes == dyn_bytes) {
        *blocks_per_sm = entry.blocks;
        return cudaSuccess;
      }
      raised = true;
    }
  }
  // Always to the maximum (the opt-in size less the kernel's static shared memory), so that a
  // concurrent launch of a larger size never sees a lower limit. A failed call is reported here,
  // not left as the thread's last error for the next launch to pick up.
  if (!raised) {
    cudaFuncAttributes attributes{};
    cudaError_t e = cudaFuncGetAttributes(&attributes, kernel);
    if (e == cudaSuccess) {
      e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               optin_bytes - static_cast<int>(attributes.sharedSizeBytes));
    }
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      return e;
    }
  }
  int blocks = 0;
  if (const cudaError_t e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(
          &blocks, kernel, threads, static_cast<size_t>(dyn_bytes));
      e != cudaSuccess) {
    (void)cudaGetLastError();
    return e;
  }
  if (blocks < 1) {
    return cudaErrorInvalidConfiguration;  // not cached: the next call says the same
  }
  if (cache->size() < 256) {
    cache->push_back(Entry{device, kernel, dyn_bytes, blocks});
  }
  *blocks_per_sm = blocks;
  return cudaSuccess;
}

}  // namespace emb::kernels::gather
