// HostAllocator: a source of host memory that a backend writes answers into faster than into
// ordinary memory. GpuStore offers pinned, mapped memory (its copy engines and kernels write rows
// straight into it); AnswerBufferPool takes its blocks from the allocator its store offers.
#ifndef EMB_SERVICE_COMMON_HOST_ALLOCATOR_H_
#define EMB_SERVICE_COMMON_HOST_ALLOCATOR_H_

#include <cstddef>

namespace emb::service {

struct HostAllocator {
  const char* name;  // for logs, e.g. "cudaHostAlloc"
  // `bytes` of memory aligned to at least 64 bytes, or nullptr when there is none to be had (the
  // caller then falls back to ordinary memory). Any thread.
  void* (*allocate)(size_t bytes);
  // Frees what allocate() returned. Any thread.
  void (*release)(void* p);
};

}  // namespace emb::service

#endif  // EMB_SERVICE_COMMON_HOST_ALLOCATOR_H_
