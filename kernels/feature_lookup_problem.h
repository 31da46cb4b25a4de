// FeatureLookupProblem: what one table-batched lookup reads and writes (LaunchFeatureLookup,
// kernels/feature_lookup.h; CpuFeatureLookup, kernels/cpu_feature_lookup.h): a batch of B samples
// and F features over several tables, ids in the KeyedJaggedTensor layout, answers pooled side by
// side (the KeyedTensor layout) or one row per id. Plain, so that the kernel's launcher (built by
// nvcc, without Abseil) and host code share it.
#ifndef EMB_KERNELS_FEATURE_LOOKUP_PROBLEM_H_
#define EMB_KERNELS_FEATURE_LOOKUP_PROBLEM_H_

#include <cstdint>

#include "kernels/data_type.h"
#include "kernels/lookup_problem.h"  // CachedRows

namespace emb::kernels {

// One table of the call. Row `id` is at rows + id * RowBytes(type, dim), or for a table in two
// tiers (cached.slots set) where its slot says (CachedRows).
struct FeatureTable {
  const void* rows = nullptr;
  DataType type = DataType::kFloat32;  // any table type
  int64_t num_rows = 0;
  int64_t dim = 0;
  CachedRows cached;  // slots null: every row is at `rows`
};

// How a feature's bag becomes its answer.
enum class Pooling : int32_t {
  kNone = 0,  // one answer row per id (a sequence feature)
  kSum = 1,   // the sum of the bag's rows
  kMean = 2,  // the sum times 1 / the bag's length
};

// One feature of the call: the table it reads and where its answer goes.
struct FeatureSpec {
  int32_t table = 0;  // index into FeatureLookupProblem::tables
  Pooling pooling = Pooling::kSum;
  // Pooled features: whether each row is multiplied by its id's weight first (where the problem
  // has weights; ignored where it has none and for unpooled features).
  bool weighted = false;
  // Pooled features: sample s's vector is elements [out_column, out_column + dim) of row s of
  // the pooled answer.
  int64_t out_column = 0;
  // Unpooled features: the k-th id of the feature (k counted from the feature's first id, over
  // all its samples) is written at element out_offset + k * dim of the unpooled answer.
  int64_t out_offset = 0;
};

// One call: bag (f, s) of feature f and sample s is ids[offsets[f * batch + s] ..
// offsets[f * batch + s + 1]). Pointers are device pointers for LaunchFeatureLookup and host
// pointers for CpuFeatureLookup.
struct FeatureLookupProblem {
  const FeatureTable* tables = nullptr;  // num_tables of them
  int32_t num_tables = 0;
  const FeatureSpec* features = nullptr;  // num_features of them
  int32_t num_features = 0;
  int64_t batch = 0;  // samples, B
  const int64_t* ids = nullptr;
  const int64_t* offsets = nullptr;  // num_features * batch + 1, never decreasing
  const float* weights = nullptr;    // nullptr, or one per id, by index in `ids`
  // [batch, pooled_width] elements of out_type, every pooled feature's vector side by side.
  void* pooled_out = nullptr;
  int64_t pooled_width = 0;
  // The unpooled features' rows, dim elements of out_type each, at their out_offset.
  void* unpooled_out = nullptr;
  DataType out_type = DataType::kFloat32;  // a value type
  // A host-side hint for the launch's shape: the widest dim of the features' tables. A smaller
  // one is still correct (wider rows take more passes), a larger one wastes lanes.
  int64_t max_dim = 0;
};

}  // namespace emb::kernels

#endif  // EMB_KERNELS_FEATURE_LOOKUP_PROBLEM_H_
