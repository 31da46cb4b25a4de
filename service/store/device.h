// Where tables live and gathers run: the --device flag, parsed and checked once.
#ifndef EMB_SERVICE_STORE_DEVICE_H_
#define EMB_SERVICE_STORE_DEVICE_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace emb::service {

struct Device {
  bool cuda = false;  // false: the CPU
  int index = 0;      // the CUDA device's index

  // "cpu" or "cuda:N", as logs, metrics and ListTables name it.
  std::string name() const;
};

// A CUDA device's memory, as cudaMemGetInfo reports it.
struct DeviceMemory {
  size_t used_bytes = 0;
  size_t total_bytes = 0;
};

// The memory of `device` now; FAILED_PRECONDITION for the CPU, INTERNAL where CUDA cannot say
// (a lost device). Callable from any thread.
absl::StatusOr<DeviceMemory> QueryDeviceMemory(const Device& device);

// "auto" -> cuda:0 where this build has CUDA and a GPU is visible, else cpu; "cuda" -> cuda:0;
// "cpu" and "cuda:N" as they are. INVALID_ARGUMENT for anything else, or for cuda when this build
// has no CUDA backend or the device does not exist.
absl::StatusOr<Device> ResolveDevice(absl::string_view flag);

// The devices of --device: one as ResolveDevice takes it, a comma-separated list of them
// ("cuda:0,cuda:1"; a device may be listed twice, each holding its own part: tests put two parts on
// one device so), or "all": every visible GPU. INVALID_ARGUMENT naming the entry at fault, or for
// "all" where no GPU is visible; a list of more than kMaxDevices.
inline constexpr int kMaxDevices = 64;
absl::StatusOr<std::vector<Device>> ResolveDevices(absl::string_view flag);

}  // namespace emb::service

#endif  // EMB_SERVICE_STORE_DEVICE_H_
