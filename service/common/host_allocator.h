// HostAllocator: a source of host memory that a backend writes answers into faster than into
// ordinary memory. The GPU backend offers pinned memory mapped into the device's address space
// (its copy engines and kernels write rows straight into it); the server makes one per device and
// hands it to that device's AnswerBufferPool.
#ifndef EMB_SERVICE_COMMON_HOST_ALLOCATOR_H_
#define EMB_SERVICE_COMMON_HOST_ALLOCATOR_H_

#include <cstddef>

namespace emb::service {

// A block of host memory, and the same memory as a device sees it (nullptr where no device does).
struct HostBlock {
  void* host = nullptr;
  void* device = nullptr;
};

// Implementations are thread-safe. An allocator must outlive every block it handed out: its
// owners share it (std::shared_ptr) with the pool that holds its blocks.
class HostAllocator {
 public:
  virtual ~HostAllocator() = default;
  // `bytes` of memory aligned to at least 64 bytes, or {nullptr, nullptr} when there is none to
  // be had (the caller then falls back to ordinary memory).
  virtual HostBlock Allocate(size_t bytes) const = 0;
  // Frees the block whose host address Allocate() returned.
  virtual void Release(void* host) const = 0;
};

}  // namespace emb::service

#endif  // EMB_SERVICE_COMMON_HOST_ALLOCATOR_H_
