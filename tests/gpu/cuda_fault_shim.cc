// An LD_PRELOAD shim for device_loss_check.py: once the file named by $EMB_FAULT_FILE exists,
// cudaEventSynchronize answers cudaErrorIllegalAddress (700), the sticky error a lost context
// gives, so that the server's device-loss path runs on a real GPU without breaking the GPU.
#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>

namespace {
using EventSynchronize = int (*)(void*);
constexpr int kCudaErrorIllegalAddress = 700;
}  // namespace

extern "C" int cudaEventSynchronize(void* event) {
  static const auto real =
      reinterpret_cast<EventSynchronize>(dlsym(RTLD_NEXT, "cudaEventSynchronize"));
  const char* fault = std::getenv("EMB_FAULT_FILE");
  if (fault != nullptr && access(fault, F_OK) == 0) {
    return kCudaErrorIllegalAddress;
  }
  return real(event);
}
