// Move-only owners of CUDA memory: DeviceBuffer<T> (cudaMalloc) and
// PinnedBuffer<T> (cudaHostAlloc), one template over where the memory lives.
//
// The factories are the only places that allocate; code that merely uses the
// memory takes the raw pointer (d_ for device memory, h_ for pinned host
// memory). Destructors free and ignore errors. A buffer is not thread-safe;
// distinct buffers may be used from distinct threads.
#ifndef EMB_KERNELS_DEVICE_BUFFER_H_
#define EMB_KERNELS_DEVICE_BUFFER_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <limits>
#include <memory>
#include <type_traits>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "kernels/cuda_status.h"

namespace emb::kernels {

// Where a CudaBuffer's memory lives: how it is allocated and freed.
struct DeviceMemory {
  static constexpr const char* kAllocator = "cudaMalloc";
  static cudaError_t Allocate(void** p, size_t bytes) { return cudaMalloc(p, bytes); }
  static void Free(void* p) { (void)cudaFree(p); }  // a destructor can't report
};
struct PinnedMemory {
  static constexpr const char* kAllocator = "cudaHostAlloc";
  // `flags`: cudaHostAllocDefault, cudaHostAllocMapped, ...
  static cudaError_t Allocate(void** p, size_t bytes, unsigned int flags = cudaHostAllocDefault) {
    return cudaHostAlloc(p, bytes, flags);
  }
  static void Free(void* p) { (void)cudaFreeHost(p); }
};

// Owns `count` elements of T in the memory `Memory` names: see DeviceBuffer and PinnedBuffer.
template <typename T, typename Memory>
class CudaBuffer {
  static_assert(std::is_trivially_copyable_v<T>, "CUDA buffers hold trivially copyable types");

 public:
  CudaBuffer() = default;  // empty: data() == nullptr, size() == 0
  CudaBuffer(CudaBuffer&&) noexcept = default;
  CudaBuffer& operator=(CudaBuffer&&) noexcept = default;
  CudaBuffer(const CudaBuffer&) = delete;
  CudaBuffer& operator=(const CudaBuffer&) = delete;

  // Allocates count * sizeof(T) bytes, uninitialized, passing `options` on to the allocator
  // (PinnedMemory takes cudaHostAlloc's flags). count == 0 gives an empty buffer.
  // INVALID_ARGUMENT if the byte size overflows; INTERNAL (see CudaStatus) if the allocation
  // fails, e.g. cudaErrorMemoryAllocation, which is not sticky.
  template <typename... Options>
  static absl::StatusOr<CudaBuffer> Allocate(size_t count, Options... options) {
    CudaBuffer buffer;
    if (count == 0) {
      return buffer;
    }
    if (count > std::numeric_limits<size_t>::max() / sizeof(T)) {
      return absl::InvalidArgumentError(
          absl::StrCat(Memory::kAllocator, " of ", count, " elements overflows"));
    }
    void* p = nullptr;
    EMB_CUDA_RETURN_IF_ERROR(Memory::Allocate(&p, count * sizeof(T), options...),
                             absl::StrCat(Memory::kAllocator, "(", count * sizeof(T), " bytes)"));
    buffer.ptr_.reset(static_cast<T*>(p));
    buffer.size_ = count;
    return buffer;
  }

  T* data() const { return ptr_.get(); }
  size_t size() const { return size_; }  // in elements
  size_t size_bytes() const { return size_ * sizeof(T); }

 private:
  struct Free {
    void operator()(T* p) const noexcept { Memory::Free(p); }
  };
  std::unique_ptr<T, Free> ptr_;
  size_t size_ = 0;
};

// `count` elements of T in device memory of the device current at Allocate() (cudaMalloc).
template <typename T>
using DeviceBuffer = CudaBuffer<T, DeviceMemory>;

// `count` elements of T in page-locked host memory (cudaHostAlloc), which copies on a stream can
// read and write asynchronously; Allocate(count, flags) takes cudaHostAlloc's flags.
template <typename T>
using PinnedBuffer = CudaBuffer<T, PinnedMemory>;

}  // namespace emb::kernels

#endif  // EMB_KERNELS_DEVICE_BUFFER_H_
