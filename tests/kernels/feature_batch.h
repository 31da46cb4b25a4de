// Host data of one table-batched lookup (kernels/feature_lookup_problem.h) for the tests of
// CpuFeatureLookup and LaunchFeatureLookup: tables, features with random bags, and the problem
// that points at them on the host. Not thread-safe; a Batch belongs to one test.
#ifndef EMB_TESTS_KERNELS_FEATURE_BATCH_H_
#define EMB_TESTS_KERNELS_FEATURE_BATCH_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

#include "kernels/data_type.h"
#include "kernels/feature_lookup_problem.h"

namespace emb::testing {

// A table's host rows: rows x dim elements of `type`, RowBytes(type, dim) bytes a row.
struct HostTable {
  DataType type = DataType::kFloat32;
  int64_t rows = 0;
  int64_t dim = 0;
  std::vector<std::byte> bytes;
};

// One call's host data.
struct Batch {
  std::vector<HostTable> tables;
  std::vector<kernels::FeatureSpec> features;
  int64_t batch = 0;
  std::vector<int64_t> ids;
  std::vector<int64_t> offsets{0};
  std::vector<float> weights;  // one per id
  DataType out_type = DataType::kFloat32;
  int64_t pooled_width = 0;
  int64_t unpooled_elements = 0;

  // The tables' widest dim, at least 1.
  int64_t max_dim() const {
    int64_t d = 1;
    for (const HostTable& t : tables) {
      d = t.dim > d ? t.dim : d;
    }
    return d;
  }
  size_t pooled_bytes() const {
    return static_cast<size_t>(batch * pooled_width) * ElementSize(out_type);
  }
  size_t unpooled_bytes() const {
    return static_cast<size_t>(unpooled_elements) * ElementSize(out_type);
  }
};

// Adds feature `spec` (its answer laid out after the ones before it) with bags of random lengths:
// mostly up to min(9, `max_length`) ids, a quarter up to `max_length`, some empty (all where
// `max_length` is 0); its first ids are its table's rows 0 and rows - 1, then random ids with
// runs of duplicates, each with a weight that is never zero.
inline void AddFeature(Batch* b, kernels::FeatureSpec spec, int64_t max_length, std::mt19937* rng) {
  const HostTable& t = b->tables[static_cast<size_t>(spec.table)];
  if (spec.pooling == kernels::Pooling::kNone) {
    spec.out_offset = b->unpooled_elements;
  } else {
    spec.out_column = b->pooled_width;
    b->pooled_width += t.dim;
  }
  std::uniform_real_distribution<float> weight(-2.0f, 2.0f);
  const size_t feature_first = b->ids.size();
  for (int64_t s = 0; s < b->batch; ++s) {
    const auto longest =
        static_cast<uint32_t>((*rng)() % 4 == 0 ? max_length : std::min<int64_t>(max_length, 9));
    const auto length = static_cast<int64_t>((*rng)() % (longest + 1));
    for (int64_t k = 0; k < length; ++k) {
      auto id = static_cast<int64_t>((*rng)() % static_cast<uint64_t>(t.rows));
      const size_t n = b->ids.size() - feature_first;
      if (n < 2) {
        id = n == 0 ? 0 : t.rows - 1;
      } else if ((*rng)() % 8 == 0) {
        id = b->ids.back();
      }
      b->ids.push_back(id);
      const float w = weight(*rng);
      b->weights.push_back(w == 0.0f ? 0.75f : w);
    }
    b->offsets.push_back(static_cast<int64_t>(b->ids.size()));
    if (spec.pooling == kernels::Pooling::kNone) {
      b->unpooled_elements += length * t.dim;
    }
  }
  b->features.push_back(spec);
}

// A feature over table `table`, pooled as `pooling` says (kNone: unpooled), for AddFeature.
inline kernels::FeatureSpec Pooled(int32_t table, kernels::Pooling pooling, bool weighted = false) {
  kernels::FeatureSpec f;
  f.table = table;
  f.pooling = pooling;
  f.weighted = weighted;
  return f;
}

inline kernels::FeatureSpec Unpooled(int32_t table) {
  return Pooled(table, kernels::Pooling::kNone);
}

// Descriptors of the tables of `b`, each pointing at its host rows (one tier).
inline std::vector<kernels::FeatureTable> HostDescriptors(const Batch& b) {
  std::vector<kernels::FeatureTable> tables;
  for (const HostTable& t : b.tables) {
    kernels::FeatureTable d;
    d.rows = t.bytes.data();
    d.type = t.type;
    d.num_rows = t.rows;
    d.dim = t.dim;
    tables.push_back(d);
  }
  return tables;
}

// The problem over the host data of `b` and `tables` (HostDescriptors), writing its answers at
// `pooled_out` and `unpooled_out`; without weights where `b` has none. Every pointer must stay
// valid while the problem is used.
inline kernels::FeatureLookupProblem HostProblem(const Batch& b,
                                                 const std::vector<kernels::FeatureTable>& tables,
                                                 void* pooled_out, void* unpooled_out) {
  kernels::FeatureLookupProblem p;
  p.tables = tables.data();
  p.num_tables = static_cast<int32_t>(tables.size());
  p.features = b.features.data();
  p.num_features = static_cast<int32_t>(b.features.size());
  p.batch = b.batch;
  p.ids = b.ids.data();
  p.offsets = b.offsets.data();
  p.weights = b.weights.empty() ? nullptr : b.weights.data();
  p.pooled_out = pooled_out;
  p.pooled_width = b.pooled_width;
  p.unpooled_out = unpooled_out;
  p.out_type = b.out_type;
  p.max_dim = b.max_dim();
  return p;
}

}  // namespace emb::testing

#endif  // EMB_TESTS_KERNELS_FEATURE_BATCH_H_
