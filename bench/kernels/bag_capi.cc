// A plain C entry point to pooled lookups (LaunchLookup of kernels/lookup.h: the bag family), for
// benchmarks that load it through ctypes (libemb_bag_capi.so; bag_benchmark.py). Not used by the
// service. Thread-safe.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/status.h"
#include "bench/kernels/gather_variant.h"  // CurrentDeviceTuning
#include "kernels/data_type.h"
#include "kernels/lookup.h"
#include "kernels/lookup_problem.h"

extern "C" {

// Enqueues LaunchLookup on `stream` (a cudaStream_t; null is the legacy default stream) on the
// current device: bag b of `num_bags` is d_ids[d_offsets[b] .. d_offsets[b + 1]) (d_offsets has
// num_bags + 1 entries), or, with d_offsets null, the one id d_ids[b] (a gather); num_ids: the ids
// of all the bags where known, else 0 (LookupProblem::num_ids). d_weights: null
// or one float per id (a weighted sum); d_scales: null or one float per bag applied to its sum (a
// mean: 1 / length, 0 for an empty bag). The answer, num_bags rows of dim elements of out_type,
// goes to d_out. Types are embedding.v1.DataType values: 1 float32, 2 float16, 3 bfloat16 (tables
// and answers), 4 int8_rowwise, 5 int4_rowwise (tables only). Every pointer is a device pointer
// that must stay valid until the work on `stream` completes; ids must be in [0, rows) and offsets
// must not decrease (not checked). Returns the cudaError_t as int: 0 on success,
// cudaErrorInvalidValue (1) for bad arguments, else the launch's CUDA error.
// NOLINTBEGIN(bugprone-easily-swappable-parameters): a C signature for ctypes
__attribute__((visibility("default"))) int emb_bags(const void* d_table, int table_type,
                                                    int64_t rows, int64_t dim, const int64_t* d_ids,
                                                    const int64_t* d_offsets, int64_t num_bags,
                                                    int64_t num_ids, const float* d_weights,
                                                    const float* d_scales, void* d_out,
                                                    int out_type, void* stream) {
  // NOLINTEND(bugprone-easily-swappable-parameters)
  emb::kernels::GatherTuning tuning;
  if (const cudaError_t e = emb::bench::CurrentDeviceTuning(&tuning); e != cudaSuccess) {
    return e;
  }
  emb::kernels::LookupProblem bags;
  bags.table = d_table;
  bags.table_type = static_cast<emb::DataType>(table_type);
  bags.rows = rows;
  bags.dim = dim;
  bags.ids = d_ids;
  bags.offsets = d_offsets;
  bags.num_bags = num_bags;
  bags.num_ids = num_ids;
  bags.weights = d_weights;
  bags.scales = d_scales;
  bags.out = d_out;
  bags.out_type = static_cast<emb::DataType>(out_type);
  const absl::Status s =
      emb::kernels::LaunchLookup(tuning, bags, static_cast<cudaStream_t>(stream));
  if (s.ok()) {
    return cudaSuccess;
  }
  if (s.code() == absl::StatusCode::kInvalidArgument) {
    return cudaErrorInvalidValue;
  }
  const cudaError_t e = cudaGetLastError();  // the launch's error, which LaunchLookup peeked at
  return e != cudaSuccess ? e : cudaErrorUnknown;
}

}  // extern "C"
