// A plain C entry point to the table-batched lookup (LaunchFeatureLookup, kernels/feature_lookup.h)
// and, beside it, the same features as one LaunchLookup (kernels/lookup.h) per feature, for
// feature_benchmark.py through ctypes (libemb_feature_capi.so). Not used by the service. A plan is
// made once (it uploads the descriptors); a plan is used by one thread at a time.
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "bench/kernels/gather_variant.h"  // CurrentDeviceTuning
#include "kernels/data_type.h"
#include "kernels/device_buffer.h"
#include "kernels/feature_lookup.h"
#include "kernels/feature_lookup_check.h"
#include "kernels/feature_lookup_problem.h"
#include "kernels/gather_tuning.h"
#include "kernels/lookup.h"
#include "kernels/lookup_problem.h"

namespace {

using emb::kernels::FeatureLookupProblem;
using emb::kernels::FeatureSpec;
using emb::kernels::FeatureTable;

// One batch shape: its tables and features, on the host and on the device.
struct Plan {
  std::vector<FeatureTable> tables;
  std::vector<FeatureSpec> features;
  emb::kernels::DeviceBuffer<FeatureTable> d_tables;
  emb::kernels::DeviceBuffer<FeatureSpec> d_features;
  int64_t batch = 0;
  int64_t pooled_width = 0;
  int64_t max_dim = 1;
  emb::DataType out_type = emb::DataType::kFloat32;
  emb::kernels::GatherTuning tuning;
};

// The problem of `plan` with these ids and answers, its descriptors on the device.
FeatureLookupProblem ProblemOf(const Plan& plan, const int64_t* d_ids, const int64_t* d_offsets,
                               const float* d_weights, void* d_pooled, void* d_unpooled) {
  FeatureLookupProblem p;
  p.tables = plan.d_tables.data();
  p.num_tables = static_cast<int32_t>(plan.tables.size());
  p.features = plan.d_features.data();
  p.num_features = static_cast<int32_t>(plan.features.size());
  p.batch = plan.batch;
  p.ids = d_ids;
  p.offsets = d_offsets;
  p.weights = d_weights;
  p.pooled_out = d_pooled;
  p.pooled_width = plan.pooled_width;
  p.unpooled_out = d_unpooled;
  p.out_type = plan.out_type;
  p.max_dim = plan.max_dim;
  return p;
}

// The C entry's code for a launcher's status: 0, cudaErrorInvalidValue, or the CUDA error.
int CodeOf(const absl::Status& s) {
  if (s.ok()) {
    return cudaSuccess;
  }
  if (s.code() == absl::StatusCode::kInvalidArgument) {
    return cudaErrorInvalidValue;
  }
  const cudaError_t e = cudaGetLastError();  // the launch's error, which the launcher peeked at
  return e != cudaSuccess ? e : cudaErrorUnknown;
}

// Feature f of `plan` as one LaunchLookup: its bags into `d_out` (batch rows of its dim), or, for
// an unpooled feature, its `num_ids` ids from `first` on, one row each.
emb::kernels::LookupProblem FeatureAsLookup(const Plan& plan, size_t f, const int64_t* d_ids,
                                            const int64_t* d_offsets, const float* d_weights,
                                            const float* d_scales, int64_t first, int64_t num_ids,
                                            void* d_out) {
  const FeatureSpec& spec = plan.features[f];
  const FeatureTable& t = plan.tables[static_cast<size_t>(spec.table)];
  emb::kernels::LookupProblem p;
  p.table = t.rows;
  p.table_type = t.type;
  p.rows = t.num_rows;
  p.dim = t.dim;
  p.cached = t.cached;
  p.out = d_out;
  p.out_type = plan.out_type;
  if (spec.pooling == emb::kernels::Pooling::kNone) {
    p.ids = d_ids + first;
    p.num_bags = num_ids;
    return p;
  }
  p.ids = d_ids;
  p.offsets = d_offsets + f * static_cast<size_t>(plan.batch);
  p.num_bags = plan.batch;
  p.num_ids = num_ids;
  p.weights = spec.weighted ? d_weights : nullptr;
  p.scales = spec.pooling == emb::kernels::Pooling::kMean
                 ? d_scales + f * static_cast<size_t>(plan.batch)
                 : nullptr;
  return p;
}

}  // namespace

extern "C" {

// Makes a plan for batches of `batch` samples over `num_tables` tables and `num_features`
// features, or returns null (bad arguments, or a CUDA error). Table i: d_table_rows[i] (device
// rows), table_types[i] (embedding.v1.DataType: 1 float32, 2 float16, 3 bfloat16, 4 int8_rowwise,
// 5 int4_rowwise), table_num_rows[i], table_dims[i]. Feature f: feature_tables[f], its pooling
// feature_poolings[f] (0 none, 1 sum, 2 mean), feature_weighted[f] (0 or 1), and feature_out[f]:
// its out_column (pooled) or out_offset (unpooled) (FeatureSpec). out_type: the answers' type.
// The host arrays are copied; the tables must outlive the plan's use.
// NOLINTBEGIN(bugprone-easily-swappable-parameters): a C signature for ctypes
__attribute__((visibility("default"))) void* emb_feature_plan(
    int num_tables, const void* const* d_table_rows, const int* table_types,
    const int64_t* table_num_rows, const int64_t* table_dims, int num_features,
    const int* feature_tables, const int* feature_poolings, const int* feature_weighted,
    const int64_t* feature_out, int64_t batch, int64_t pooled_width, int out_type) {
  // NOLINTEND(bugprone-easily-swappable-parameters)
  auto plan = std::make_unique<Plan>();
  if (emb::bench::CurrentDeviceTuning(&plan->tuning) != cudaSuccess) {
    return nullptr;
  }
  for (int i = 0; i < num_tables; ++i) {
    FeatureTable t;
    t.rows = d_table_rows[i];
    t.type = static_cast<emb::DataType>(table_types[i]);
    t.num_rows = table_num_rows[i];
    t.dim = table_dims[i];
    plan->max_dim = t.dim > plan->max_dim ? t.dim : plan->max_dim;
    plan->tables.push_back(t);
  }
  for (int f = 0; f < num_features; ++f) {
    FeatureSpec spec;
    spec.table = feature_tables[f];
    spec.pooling = static_cast<emb::kernels::Pooling>(feature_poolings[f]);
    spec.weighted = feature_weighted[f] != 0;
    spec.out_column = spec.pooling == emb::kernels::Pooling::kNone ? 0 : feature_out[f];
    spec.out_offset = spec.pooling == emb::kernels::Pooling::kNone ? feature_out[f] : 0;
    plan->features.push_back(spec);
  }
  plan->batch = batch;
  plan->pooled_width = pooled_width;
  plan->out_type = static_cast<emb::DataType>(out_type);
  auto d_tables = emb::kernels::DeviceBuffer<FeatureTable>::Allocate(plan->tables.size());
  auto d_features = emb::kernels::DeviceBuffer<FeatureSpec>::Allocate(plan->features.size());
  if (!d_tables.ok() || !d_features.ok()) {
    return nullptr;
  }
  plan->d_tables = std::move(*d_tables);
  plan->d_features = std::move(*d_features);
  if (cudaMemcpy(plan->d_tables.data(), plan->tables.data(), plan->d_tables.size_bytes(),
                 cudaMemcpyHostToDevice) != cudaSuccess ||
      cudaMemcpy(plan->d_features.data(), plan->features.data(), plan->d_features.size_bytes(),
                 cudaMemcpyHostToDevice) != cudaSuccess) {
    return nullptr;
  }
  return plan.release();
}

__attribute__((visibility("default"))) void emb_feature_plan_free(void* plan) {
  delete static_cast<Plan*>(plan);
}

// Enqueues LaunchFeatureLookup of `plan`'s features on `stream` (a cudaStream_t; null is the
// legacy default stream): ids and offsets in the KeyedJaggedTensor layout (num_features * batch
// + 1 offsets), d_weights null or one per id, d_pooled [batch, pooled_width] and d_unpooled (null
// where no feature is unpooled) of the plan's out_type. Device pointers, valid until the work on
// `stream` completes; ids in range (not checked). The descriptors are checked on the host first.
// Returns 0, cudaErrorInvalidValue (1) for bad arguments, else the launch's CUDA error.
__attribute__((visibility("default"))) int emb_feature_lookup(void* plan, const int64_t* d_ids,
                                                              const int64_t* d_offsets,
                                                              const float* d_weights,
                                                              void* d_pooled, void* d_unpooled,
                                                              void* stream) {
  const Plan& p = *static_cast<const Plan*>(plan);
  const FeatureLookupProblem problem =
      ProblemOf(p, d_ids, d_offsets, d_weights, d_pooled, d_unpooled);
  if (!emb::kernels::CheckFeatureDescriptors(problem, p.tables, p.features).ok()) {
    return cudaErrorInvalidValue;
  }
  return CodeOf(
      emb::kernels::LaunchFeatureLookup(p.tuning, problem, static_cast<cudaStream_t>(stream)));
}

// The same features as one LaunchLookup each, one after another on `stream`: feature f's answer
// is a block of d_out after the blocks of the features before it, [batch, dim] for a pooled
// feature and [h_feature_ids[f], dim] for an unpooled one. h_feature_ids (host, num_features):
// each feature's ids (offsets[(f + 1) * batch] - offsets[f * batch]); d_scales: null, or one per
// bag (a mean feature's 1 / length). Returns as emb_feature_lookup.
__attribute__((visibility("default"))) int emb_feature_lookup_per_table(
    void* plan, const int64_t* d_ids, const int64_t* d_offsets, const float* d_weights,
    const float* d_scales, const int64_t* h_feature_ids, void* d_out, void* stream) {
  const Plan& p = *static_cast<const Plan*>(plan);
  const size_t element = emb::ElementSize(p.out_type);
  auto* out = static_cast<unsigned char*>(d_out);
  int64_t first = 0;
  for (size_t f = 0; f < p.features.size(); ++f) {
    const FeatureSpec& spec = p.features[f];
    if (spec.pooling == emb::kernels::Pooling::kMean && d_scales == nullptr) {
      return cudaErrorInvalidValue;
    }
    const emb::kernels::LookupProblem lookup =
        FeatureAsLookup(p, f, d_ids, d_offsets, d_weights, d_scales, first, h_feature_ids[f], out);
    if (const int e =
            CodeOf(emb::kernels::LaunchLookup(p.tuning, lookup, static_cast<cudaStream_t>(stream)));
        e != cudaSuccess) {
      return e;
    }
    out += static_cast<size_t>(lookup.num_bags * lookup.dim) * element;
    first += h_feature_ids[f];
  }
  return cudaSuccess;
}

}  // extern "C"
