// HostAllocator: a source of host memory that a backend writes answers into faster than into
// ordinary memory. GpuStore offers pinned, mapped memory (its copy engines and kernels write rows
// straight into it); AnswerBufferPool takes its blocks from the allocator its store offers.
#ifndef EMB_SERVICE_COMMON_HOST_ALLOCATOR_H_
#define EMB_SERVICE_COMMON_HOST_ALLOCATOR_H_

#include <cstddef>

namespace emb::service {

// Implementations are thread-safe and live as long as the process (pools that hold their blocks
// are never destroyed).
class HostAllocator {
 public:
  virtual ~HostAllocator() = default;
  // `bytes` of memory aligned to at least 64 bytes, or nullptr when there is none to be had (the
  // caller then falls back to ordinary memory).
  virtual void* Allocate(size_t bytes) const = 0;
  // Frees what Allocate() returned.
  virtual void Release(void* p) const = 0;
};

}  // namespace emb::service

#endif  // EMB_SERVICE_COMMON_HOST_ALLOCATOR_H_
