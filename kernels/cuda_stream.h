// Move-only owners of a CUDA stream and a CUDA event.
//
// Code that only uses a stream or event takes the raw cudaStream_t /
// cudaEvent_t (the cuda::stream / cuda::stream_ref split). Destructors destroy
// and ignore errors. An owner is not thread-safe; the stream itself may be used
// from any thread.
#ifndef EMB_KERNELS_CUDA_STREAM_H_
#define EMB_KERNELS_CUDA_STREAM_H_

#include <cuda_runtime_api.h>

#include <memory>
#include <type_traits>

#include "absl/status/statusor.h"
#include "kernels/cuda_status.h"

namespace emb::kernels {

// A non-blocking stream (cudaStreamNonBlocking: no implicit sync with the
// legacy default stream) on the device current at Create().
class CudaStream {
 public:
  CudaStream() = default;  // empty: get() == nullptr, which is NOT a usable stream here
  CudaStream(CudaStream&&) noexcept = default;
  CudaStream& operator=(CudaStream&&) noexcept = default;
  CudaStream(const CudaStream&) = delete;
  CudaStream& operator=(const CudaStream&) = delete;

  // INTERNAL if cudaStreamCreateWithFlags fails.
  static absl::StatusOr<CudaStream> Create() {
    cudaStream_t s = nullptr;
    EMB_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking),
                             "cudaStreamCreateWithFlags");
    CudaStream stream;
    stream.stream_.reset(s);
    return stream;
  }

  cudaStream_t get() const { return stream_.get(); }

 private:
  struct Destroy {
    void operator()(cudaStream_t s) const noexcept { (void)cudaStreamDestroy(s); }
  };
  std::unique_ptr<std::remove_pointer_t<cudaStream_t>, Destroy> stream_;
};

// An event on the device current at Create(). Without `timing` it is created
// with cudaEventDisableTiming, the cheap kind for ordering and completion
// checks. With `blocking`, cudaEventSynchronize on it sleeps until the device
// signals the event (cudaEventBlockingSync) instead of spinning on a core.
class CudaEvent {
 public:
  CudaEvent() = default;  // empty: get() == nullptr
  CudaEvent(CudaEvent&&) noexcept = default;
  CudaEvent& operator=(CudaEvent&&) noexcept = default;
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;

  // INTERNAL if cudaEventCreateWithFlags fails.
  static absl::StatusOr<CudaEvent> Create(bool timing, bool blocking = false) {
    cudaEvent_t e = nullptr;
    const unsigned flags = (timing ? cudaEventDefault : cudaEventDisableTiming) |
                           (blocking ? cudaEventBlockingSync : 0u);
    EMB_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&e, flags), "cudaEventCreateWithFlags");
    CudaEvent event;
    event.event_.reset(e);
    return event;
  }

  cudaEvent_t get() const { return event_.get(); }

 private:
  struct Destroy {
    void operator()(cudaEvent_t e) const noexcept { (void)cudaEventDestroy(e); }
  };
  std::unique_ptr<std::remove_pointer_t<cudaEvent_t>, Destroy> event_;
};

}  // namespace emb::kernels

#endif  // EMB_KERNELS_CUDA_STREAM_H_
