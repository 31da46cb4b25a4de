#include <cstdint>

#include "tests/testing/cuda_fault.h"

namespace emb::testing {
namespace {

// One thread stores to an address no allocation covers.
__global__ void StoreToInvalidAddressKernel(int* p) { *p = 1; }

}  // namespace

cudaError_t BreakCudaContext() {
  int* invalid = reinterpret_cast<int*>(uintptr_t{0x10});
  StoreToInvalidAddressKernel<<<1, 1>>>(invalid);
  return cudaDeviceSynchronize();
}

}  // namespace emb::testing
