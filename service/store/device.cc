#include "service/store/device.h"

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "service/common/status_macros.h"

#if EMB_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace emb::service {
namespace {

int VisibleGpus() {
#if EMB_HAVE_CUDA
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return count;
#else
  return 0;
#endif
}

}  // namespace

std::string Device::name() const { return cuda ? absl::StrCat("cuda:", index) : "cpu"; }

absl::StatusOr<DeviceMemory> QueryDeviceMemory(const Device& device) {
  if (!device.cuda) {
    return absl::FailedPreconditionError("the CPU has no device memory to report");
  }
#if EMB_HAVE_CUDA
  size_t free_bytes = 0;
  size_t total_bytes = 0;
  cudaError_t err = cudaSetDevice(device.index);
  if (err == cudaSuccess) {
    err = cudaMemGetInfo(&free_bytes, &total_bytes);
  }
  if (err != cudaSuccess) {
    return absl::InternalError(
        absl::StrCat(device.name(), ": cudaMemGetInfo failed: ", cudaGetErrorName(err)));
  }
  return DeviceMemory{total_bytes - free_bytes, total_bytes};
#else
  return absl::FailedPreconditionError("this build has no CUDA backend");
#endif
}

absl::StatusOr<Device> ResolveDevice(absl::string_view flag) {
  if (flag == "cpu") {
    return Device{};
  }
  if (flag == "auto") {
    return VisibleGpus() > 0 ? Device{/*cuda=*/true, /*index=*/0} : Device{};
  }
  int index = 0;
  absl::string_view number = flag;
  if (flag != "cuda" &&
      !(absl::ConsumePrefix(&number, "cuda:") && absl::SimpleAtoi(number, &index) && index >= 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--device=", flag, ": expected auto, cpu, cuda or cuda:N"));
  }
#if !EMB_HAVE_CUDA
  return absl::InvalidArgumentError(absl::StrCat(
      "--device=", flag, ": this build has no CUDA backend (nvcc was not found at build time)"));
#else
  const int gpus = VisibleGpus();
  if (index >= gpus) {
    return absl::InvalidArgumentError(
        absl::StrCat("--device=", flag, ": ", gpus, " CUDA device(s) visible, so no cuda:", index));
  }
  return Device{/*cuda=*/true, index};
#endif
}

absl::StatusOr<std::vector<Device>> ResolveDevices(absl::string_view flag) {
  std::vector<Device> devices;
  if (flag == "all") {
    const int gpus = VisibleGpus();
    if (gpus == 0) {
      return absl::InvalidArgumentError(
          "--device=all: no CUDA device is visible (or this build has no CUDA backend)");
    }
    for (int i = 0; i < gpus && i < kMaxDevices; ++i) {
      devices.push_back(Device{/*cuda=*/true, i});
    }
    return devices;
  }
  for (absl::string_view entry : absl::StrSplit(flag, ',')) {
    // An entry's error names it (--device=ENTRY: ...).
    ASSIGN_OR_RETURN(const Device device, ResolveDevice(entry));
    devices.push_back(device);
  }
  if (devices.size() > kMaxDevices) {
    return absl::InvalidArgumentError(
        absl::StrCat("--device=", flag, ": ", devices.size(), " devices, at most ", kMaxDevices));
  }
  return devices;
}

}  // namespace emb::service
