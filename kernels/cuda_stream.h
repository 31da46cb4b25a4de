// Move-only owners of a CUDA stream and a CUDA event: CudaStream and CudaEvent, one template over
// what the handle is and how it is created and destroyed.
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

// What a CudaHandle owns: a non-blocking stream (cudaStreamNonBlocking: no implicit sync with
// the legacy default stream) on the device current at Create().
struct StreamHandle {
  using Handle = cudaStream_t;
  static constexpr const char* kCreator = "cudaStreamCreateWithFlags";
  static cudaError_t Create(cudaStream_t* s) {
    return cudaStreamCreateWithFlags(s, cudaStreamNonBlocking);
  }
  static void Destroy(cudaStream_t s) { (void)cudaStreamDestroy(s); }  // a destructor can't report
};

// An event on the device current at Create(). Without `timing` it is created with
// cudaEventDisableTiming, the cheap kind for ordering and completion checks. With `blocking`,
// cudaEventSynchronize on it sleeps until the device signals the event (cudaEventBlockingSync)
// instead of spinning on a core.
struct EventHandle {
  using Handle = cudaEvent_t;
  static constexpr const char* kCreator = "cudaEventCreateWithFlags";
  static cudaError_t Create(cudaEvent_t* e, bool timing, bool blocking = false) {
    const unsigned flags = (timing ? cudaEventDefault : cudaEventDisableTiming) |
                           (blocking ? cudaEventBlockingSync : 0u);
    return cudaEventCreateWithFlags(e, flags);
  }
  static void Destroy(cudaEvent_t e) { (void)cudaEventDestroy(e); }
};

// Owns one handle of the kind `Kind` describes (StreamHandle, EventHandle).
template <typename Kind>
class CudaHandle {
 public:
  using Handle = typename Kind::Handle;

  CudaHandle() = default;  // empty: get() == nullptr, which is NOT a usable handle here
  CudaHandle(CudaHandle&&) noexcept = default;
  CudaHandle& operator=(CudaHandle&&) noexcept = default;
  CudaHandle(const CudaHandle&) = delete;
  CudaHandle& operator=(const CudaHandle&) = delete;

  // Creates a handle, passing `options` on to Kind::Create (EventHandle takes timing and
  // blocking). INTERNAL (see CudaStatus) if the creating call fails.
  template <typename... Options>
  static absl::StatusOr<CudaHandle> Create(Options... options) {
    Handle h = nullptr;
    EMB_CUDA_RETURN_IF_ERROR(Kind::Create(&h, options...), Kind::kCreator);
    CudaHandle owner;
    owner.handle_.reset(h);
    return owner;
  }

  Handle get() const { return handle_.get(); }

 private:
  struct Destroy {
    void operator()(Handle h) const noexcept { Kind::Destroy(h); }
  };
  std::unique_ptr<std::remove_pointer_t<Handle>, Destroy> handle_;
};

// CudaStream::Create(); CudaEvent::Create(bool timing, bool blocking = false).
using CudaStream = CudaHandle<StreamHandle>;
using CudaEvent = CudaHandle<EventHandle>;

}  // namespace emb::kernels

#endif  // EMB_KERNELS_CUDA_STREAM_H_
