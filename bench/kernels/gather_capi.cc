// A plain C entry point to the CUDA gather, for benchmarks that load it through
// ctypes (libemb_gather_capi.so; gather_benchmark.py, ncu_gather.py). Not used by the service.
// Thread-safe.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/status.h"
#include "bench/kernels/gather_variant.h"
#include "kernels/data_type.h"
#include "kernels/gather_plan.h"
#include "kernels/lookup.h"

namespace {

bool ToDataType(int value, emb::DataType* out) {
  *out = static_cast<emb::DataType>(value);
  return emb::IsDataType(*out);
}

// An answer's type: a value type, never a quantized one.
bool ToValueType(int value, emb::DataType* out) {
  *out = static_cast<emb::DataType>(value);
  return emb::IsValueType(*out);
}

}  // namespace

extern "C" {

int emb_gather_ex(const void* d_table, int table_type, int64_t rows, int64_t dim,
                  const int64_t* d_ids, int64_t n, void* d_out, int out_type, int max_blocks,
                  int variant, void* stream);

// Enqueues the service's gather, LaunchLookup (kernels/lookup.h) of ids one an answer row, on
// `stream` (a cudaStream_t; null is the legacy default stream) on the current device. Types are
// embedding.v1.DataType values: 1 float32, 2 float16, 3 bfloat16, and for tables also
// 4 int8_rowwise, 5 int4_rowwise (which the rule gives the bag kernel). Returns the cudaError_t as
// int: 0 on success, cudaErrorInvalidValue (1) for bad arguments.
__attribute__((visibility("default"))) int emb_gather(const void* d_table, int table_type,
                                                      int64_t rows, int64_t dim,
                                                      const int64_t* d_ids, int64_t n, void* d_out,
                                                      int out_type, void* stream) {
  return emb_gather_ex(d_table, table_type, rows, dim, d_ids, n, d_out, out_type, 0, -1, stream);
}

// emb_gather for launch-shape experiments: a grid cap other than the default (0 keeps it; see
// GatherPlan::max_blocks in kernels/gather_plan.h for what -k and > 0 mean on each path), and a
// kernel variant other than the default (variant < 0 keeps the default, the rule's plan): bits
// 0-1 the unroll level (0..3), bit 2 interleaved (1) or one span per block (0), bit 3 plain (1)
// or evict-first (0) answer stores, bit 4 table loads with an L2 evict_last policy (1), bits 5-6
// the path: 0 kUnits, 1 kSliceOwners, 2 kRowOwners, 3 the rule's (the other bits apply where it
// takes kUnits), bit 7 (with path 0) kColumnPasses. A forced path that does not fit the gather
// falls back to kUnits. See GatherVariantFromBits and PlanOfVariant (gather_variant.h).
// NOLINTBEGIN(bugprone-easily-swappable-parameters): a C signature for ctypes
__attribute__((visibility("default"))) int emb_gather_ex(const void* d_table, int table_type,
                                                         int64_t rows, int64_t dim,
                                                         const int64_t* d_ids, int64_t n,
                                                         void* d_out, int out_type, int max_blocks,
                                                         int variant, void* stream) {
  // NOLINTEND(bugprone-easily-swappable-parameters)
  emb::DataType in{};
  emb::DataType out{};
  if (!ToDataType(table_type, &in) || !ToValueType(out_type, &out) || rows < 0 || dim < 1 ||
      n < 0) {
    return cudaErrorInvalidValue;
  }
  if (n == 0) {
    return cudaSuccess;
  }
  if (d_table == nullptr || d_ids == nullptr || d_out == nullptr) {
    return cudaErrorInvalidValue;
  }
  emb::kernels::GatherTuning tuning;
  if (const cudaError_t e = emb::bench::CurrentDeviceTuning(&tuning); e != cudaSuccess) {
    return e;
  }
  if (variant < 0 && max_blocks == 0) {
    // The service's route: the rule's family and plan, one argument check.
    emb::kernels::LookupProblem p;
    p.table = d_table;
    p.table_type = in;
    p.rows = rows;
    p.dim = dim;
    p.ids = d_ids;
    p.num_bags = n;
    p.out = d_out;
    p.out_type = out;
    const absl::Status s = emb::kernels::LaunchLookup(tuning, p, static_cast<cudaStream_t>(stream));
    if (s.ok()) {
      return cudaSuccess;
    }
    const cudaError_t e = cudaGetLastError();
    return e != cudaSuccess ? e : cudaErrorInvalidValue;
  }
  if (emb::IsQuantized(in)) {
    return cudaErrorInvalidValue;  // no gather plan reads quantized rows: no variants, no caps
  }
  emb::bench::GatherVariant chosen;
  if (variant >= 0 && !emb::bench::GatherVariantFromBits(variant, &chosen)) {
    return cudaErrorInvalidValue;
  }
  const emb::kernels::GatherProblem problem{d_table, in, rows, dim, d_ids, n, d_out, out};
  return emb::kernels::LaunchGatherPlan(
      tuning, emb::bench::PlanOfVariant(tuning, chosen, max_blocks, problem), problem,
      static_cast<cudaStream_t>(stream));
}

// The path that emb_gather_ex with these arguments takes, as a GatherPath value (1 kUnits,
// 3 kRowOwners, 4 kSliceOwners, 5 kColumnPasses), or -1 for bad arguments, a quantized table
// (no gather path: the bag kernel) or a CUDA error.
// NOLINTBEGIN(bugprone-easily-swappable-parameters): a C signature for ctypes
__attribute__((visibility("default"))) int emb_gather_path(const void* d_table, int table_type,
                                                           int64_t rows, int64_t dim, int64_t n,
                                                           const void* d_out, int out_type,
                                                           int variant) {
  // NOLINTEND(bugprone-easily-swappable-parameters)
  emb::DataType in{};
  emb::DataType out{};
  if (!ToValueType(table_type, &in) || !ToValueType(out_type, &out) || rows < 0 || dim < 1 ||
      n < 0) {
    return -1;
  }
  emb::kernels::GatherTuning tuning;
  if (emb::bench::CurrentDeviceTuning(&tuning) != cudaSuccess) {
    return -1;
  }
  emb::bench::GatherVariant chosen;
  if (variant >= 0 && !emb::bench::GatherVariantFromBits(variant, &chosen)) {
    return -1;
  }
  // Planning reads the answer's address only (its alignment), never the memory.
  const emb::kernels::GatherProblem problem{
      d_table, in, rows, dim, nullptr, n, const_cast<void*>(d_out), out};
  return static_cast<int>(emb::bench::PlanOfVariant(tuning, chosen, 0, problem).path);
}

// Writes the current device's gather tuning; returns the cudaError_t as int.
// NOLINTNEXTLINE(bugprone-easily-swappable-parameters): a C signature for ctypes
__attribute__((visibility("default"))) int emb_gather_tuning(int* num_sms, int* blocks_per_sm,
                                                             int* threads_per_block) {
  emb::kernels::GatherTuning tuning;
  if (const cudaError_t e = emb::bench::CurrentDeviceTuning(&tuning); e != cudaSuccess) {
    return e;
  }
  *num_sms = tuning.num_sms;
  *blocks_per_sm = tuning.blocks_per_sm;
  *threads_per_block = tuning.threads_per_block;
  return cudaSuccess;
}

}  // extern "C"
