// Test-only: breaks the current CUDA context on purpose, as a faulting kernel would in production.
#ifndef EMB_TESTS_TESTING_CUDA_FAULT_H_
#define EMB_TESTS_TESTING_CUDA_FAULT_H_

#include <cuda_runtime_api.h>

namespace emb::testing {

// Runs a kernel that stores through an invalid device address and waits for it: the context is
// then lost for the rest of the process (a sticky error such as cudaErrorIllegalAddress).
// Returns the error the wait reported.
cudaError_t BreakCudaContext();

}  // namespace emb::testing

#endif  // EMB_TESTS_TESTING_CUDA_FAULT_H_
