// Move-only owners of CUDA memory: DeviceBuffer<T> (cudaMalloc) and
// PinnedBuffer<T> (cudaHostAlloc).
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

// Owns `count` elements of T in device memory of the device current at
// Allocate().
template <typename T>
class DeviceBuffer {
  static_assert(std::is_trivially_copyable_v<T>, "device memory holds trivially copyable types");

 public:
  DeviceBuffer() = default;  // empty: data() == nullptr, size() == 0
  DeviceBuffer(DeviceBuffer&&) noexcept = default;
  DeviceBuffer& operator=(DeviceBuffer&&) noexcept = default;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  // cudaMalloc of count * sizeof(T) bytes, uninitialized. count == 0 gives an
  // empty buffer. INVALID_ARGUMENT if the byte size overflows; INTERNAL (see
  // CudaStatus) if cudaMalloc fails, e.g. cudaErrorMemoryAllocation, which is
  // not sticky.
  static absl::StatusOr<DeviceBuffer> Allocate(size_t count) {
    DeviceBuffer buffer;
    if (count == 0) {
      return buffer;
    }
    if (count > std::numeric_limits<size_t>::max() / sizeof(T)) {
      return absl::InvalidArgumentError(absl::StrCat("DeviceBuffer of ", count, " elements"));
    }
    void* p = nullptr;
    EMB_CUDA_RETURN_IF_ERROR(cudaMalloc(&p, count * sizeof(T)),
                             absl::StrCat("cudaMalloc(", count * sizeof(T), " bytes)"));
    buffer.ptr_.reset(static_cast<T*>(p));
    buffer.size_ = count;
    return buffer;
  }

  T* data() const { return ptr_.get(); }
  size_t size() const { return size_; }  // in elements
  size_t size_bytes() const { return size_ * sizeof(T); }

 private:
  struct Free {
    void operator()(T* p) const noexcept { (void)cudaFree(p); }  // a destructor can't report
  };
  std::unique_ptr<T, Free> ptr_;
  size_t size_ = 0;
};

// Owns `count` elements of T in page-locked host memory (cudaHostAlloc), which
// copies on a stream can read and write asynchronously.
template <typename T>
class PinnedBuffer {
  static_assert(std::is_trivially_copyable_v<T>, "pinned memory holds trivially copyable types");

 public:
  PinnedBuffer() = default;  // empty: data() == nullptr, size() == 0
  PinnedBuffer(PinnedBuffer&&) noexcept = default;
  PinnedBuffer& operator=(PinnedBuffer&&) noexcept = default;
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;

  // cudaHostAlloc of count * sizeof(T) bytes with `flags`
  // (cudaHostAllocDefault, ...), uninitialized. count == 0 gives an empty
  // buffer. Errors as DeviceBuffer::Allocate.
  static absl::StatusOr<PinnedBuffer> Allocate(size_t count,
                                               unsigned int flags = cudaHostAllocDefault) {
    PinnedBuffer buffer;
    if (count == 0) {
      return buffer;
    }
    if (count > std::numeric_limits<size_t>::max() / sizeof(T)) {
      return absl::InvalidArgumentError(absl::StrCat("PinnedBuffer of ", count, " elements"));
    }
    void* p = nullptr;
    EMB_CUDA_RETURN_IF_ERROR(cudaHostAlloc(&p, count * sizeof(T), flags),
                             absl::StrCat("cudaHostAlloc(", count * sizeof(T), " bytes)"));
    buffer.ptr_.reset(static_cast<T*>(p));
    buffer.size_ = count;
    return buffer;
  }

  T* data() const { return ptr_.get(); }
  size_t size() const { return size_; }  // in elements
  size_t size_bytes() const { return size_ * sizeof(T); }

 private:
  struct Free {
    void operator()(T* p) const noexcept { (void)cudaFreeHost(p); }
  };
  std::unique_ptr<T, Free> ptr_;
  size_t size_ = 0;
};

}  // namespace emb::kernels

#endif  // EMB_KERNELS_DEVICE_BUFFER_H_
