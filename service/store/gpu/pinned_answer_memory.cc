#include "service/store/gpu/pinned_answer_memory.h"

#include <cuda_runtime_api.h>

namespace emb::service {

HostBlock PinnedAnswerMemory::Allocate(size_t bytes) const {
  void* host = nullptr;
  if (cudaSetDevice(device_) != cudaSuccess ||
      cudaHostAlloc(&host, bytes, cudaHostAllocMapped | cudaHostAllocPortable) != cudaSuccess) {
    (void)cudaGetLastError();  // not sticky: the pool falls back to ordinary memory
    return HostBlock{};
  }
  void* device = nullptr;
  if (cudaHostGetDevicePointer(&device, host, 0) != cudaSuccess) {
    (void)cudaGetLastError();
    (void)cudaFreeHost(host);
    return HostBlock{};
  }
  return HostBlock{host, device};
}

void PinnedAnswerMemory::Release(void* host) const {
  (void)cudaSetDevice(device_);
  (void)cudaFreeHost(host);
}

}  // namespace emb::service
