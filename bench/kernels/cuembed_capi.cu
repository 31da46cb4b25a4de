// A plain C entry point to NVIDIA cuEmbed's forward (cuembed::EmbeddingForward, header-only:
// github.com/NVIDIA/cuEmbed), for bag_benchmark.py, which loads libemb_cuembed_capi.so through
// ctypes to time cuEmbed beside our bag kernel. Built only where a copy of cuEmbed's headers sits
// in .cuembed/ (never committed; bench/kernels/CMakeLists.txt). Not used by the service.
#include <cuda_runtime_api.h>

#include <climits>
#include <cstdint>

#include "cuembed/include/embedding_lookup.cuh"

extern "C" {

// Enqueues cuembed::EmbeddingForward over a float32 table in CSR form on `stream` (a
// cudaStream_t): bag b of `num_bags` is d_ids[d_offsets[b] .. d_offsets[b + 1]) (int64 ids and
// offsets), answer float32, num_bags rows of dim. mode 0: sum (d_weights null) or weighted sum
// (d_weights: one float per id); mode 1: mean (cuEmbed divides by the bag's length, or by its
// summed weights when weighted; an empty bag gives zeros). Returns the cudaError_t as int: 0 on
// success, cudaErrorInvalidValue (1) for arguments cuEmbed does not take (it would abort on
// them: rows not a multiple of 4 bytes or wider than 1024 loads), else the launch's error.
// NOLINTBEGIN(bugprone-easily-swappable-parameters): a C signature for ctypes
__attribute__((visibility("default"))) int emb_cuembed_forward(
    const float* d_table, int64_t dim, const int64_t* d_ids, const int64_t* d_offsets,
    int64_t num_bags, const float* d_weights, int mode, float* d_out, void* stream) {
  // NOLINTEND(bugprone-easily-swappable-parameters)
  if (d_table == nullptr || d_ids == nullptr || d_offsets == nullptr || d_out == nullptr ||
      dim < 1 || dim > 4 * 1024 || num_bags < 0 || num_bags > INT_MAX || (mode != 0 && mode != 1)) {
    return cudaErrorInvalidValue;
  }
  if (num_bags == 0) {
    return cudaSuccess;
  }
  (void)cudaGetLastError();  // a stale non-sticky error is not this launch's
  cuembed::EmbeddingForward<float, float, int64_t, int64_t>(
      d_table, static_cast<int>(dim), d_ids, d_offsets, d_weights, static_cast<int>(num_bags),
      /*num_hots=*/0, mode == 0 ? cuembed::CombineMode::kSum : cuembed::CombineMode::kMean, d_out,
      static_cast<cudaStream_t>(stream));
  return cudaPeekAtLastError();
}

}  // extern "C"
