// CudaCheck: how every part of a GpuStore turns a cudaError_t into a Status. The Status names the
// call and the device; a sticky error (the device's context is dead, STYLE §3) also reports the
// device lost, through StoreOptions::on_device_lost, which ends the process. Copyable;
// thread-safe (on_device_lost must be).
#ifndef EMB_SERVICE_STORE_GPU_CUDA_CHECK_H_
#define EMB_SERVICE_STORE_GPU_CUDA_CHECK_H_

#include <cuda_runtime_api.h>

#include <functional>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "kernels/cuda_status.h"

namespace emb::service {

class CudaCheck {
 public:
  // `on_device_lost` may be empty (then a sticky error is only returned).
  CudaCheck(int device, std::function<void(const std::string& why)> on_device_lost)
      : device_(device),
        device_name_(absl::StrCat("cuda:", device)),
        on_device_lost_(std::move(on_device_lost)) {}

  int device() const { return device_; }
  // "cuda:N".
  const std::string& device_name() const { return device_name_; }

  // OK for cudaSuccess; else INTERNAL naming the CUDA error, `what` and the device.
  absl::Status operator()(cudaError_t e, const char* what) const {
    if (e == cudaSuccess) {
      return absl::OkStatus();
    }
    absl::Status s = kernels::CudaStatus(e, absl::StrCat(what, " on ", device_name_));
    if (kernels::IsStickyCudaError(e) && on_device_lost_) {
      on_device_lost_(std::string(s.message()));
    }
    return s;
  }

 private:
  int device_;
  std::string device_name_;
  std::function<void(const std::string& why)> on_device_lost_;
};

}  // namespace emb::service

#endif  // EMB_SERVICE_STORE_GPU_CUDA_CHECK_H_
