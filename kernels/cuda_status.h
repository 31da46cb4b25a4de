// Turns CUDA runtime errors into absl::Status, and tells the errors that kill a
// context apart. Thread-safe (no state).
#ifndef EMB_KERNELS_CUDA_STATUS_H_
#define EMB_KERNELS_CUDA_STATUS_H_

#include <cuda_runtime_api.h>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace emb::kernels {

// OK for cudaSuccess; otherwise INTERNAL with the message "<what>:
// <cudaErrorName>: <description>".
absl::Status CudaStatus(cudaError_t e, absl::string_view what);

// True for the "sticky" errors that leave the CUDA context unusable until the
// process exits (illegal address, launch failure, misaligned address, illegal
// instruction, hardware stack error, uncorrectable ECC, ...). Every later CUDA
// call in the process fails after one of these.
bool IsStickyCudaError(cudaError_t e);

}  // namespace emb::kernels

// Evaluates `expr` (a cudaError_t) once and returns CudaStatus(expr, what) from
// the enclosing function if it is not cudaSuccess.
#define EMB_CUDA_RETURN_IF_ERROR(expr, what)                    \
  do {                                                          \
    const cudaError_t emb_cuda_error_ = (expr);                 \
    if (emb_cuda_error_ != cudaSuccess) {                       \
      return ::emb::kernels::CudaStatus(emb_cuda_error_, what); \
    }                                                           \
  } while (false)

#endif  // EMB_KERNELS_CUDA_STATUS_H_
