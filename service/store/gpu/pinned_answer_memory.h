// PinnedAnswerMemory: the HostAllocator of one GPU's AnswerBufferPool. Pinned host memory, mapped
// into the device's address space and portable (cudaHostAlloc), so that the GPU store's kernels
// and copy engines write a caller's rows straight into the buffer gRPC sends from; each block
// comes with its device address (cudaHostGetDevicePointer), which the batcher hands to the store
// in AnswerSpan::device, so no span is looked up on the request path.
//
// Blocks are allocated and freed with the allocator's device current, so that a thread that never
// used CUDA (a gRPC thread recycling an answer) does not create a context on device 0 for it.
// Thread-safe: it holds nothing but the device number. Made by the server, one per device
// (CreateAnswerMemory in store_factory.h), and shared with the pool that holds its blocks.
#ifndef EMB_SERVICE_STORE_GPU_PINNED_ANSWER_MEMORY_H_
#define EMB_SERVICE_STORE_GPU_PINNED_ANSWER_MEMORY_H_

#include <cstddef>

#include "service/common/host_allocator.h"

namespace emb::service {

class PinnedAnswerMemory final : public HostAllocator {
 public:
  explicit PinnedAnswerMemory(int device) : device_(device) {}

  // {nullptr, nullptr} where CUDA has no such memory to give (the pool then uses new[]); the
  // error is not sticky and is cleared.
  HostBlock Allocate(size_t bytes) const override;
  void Release(void* host) const override;

 private:
  const int device_;
};

}  // namespace emb::service

#endif  // EMB_SERVICE_STORE_GPU_PINNED_ANSWER_MEMORY_H_
