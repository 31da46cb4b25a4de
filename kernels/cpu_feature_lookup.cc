#include "kernels/cpu_feature_lookup.h"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "kernels/cpu_gather.h"
#include "kernels/feature_lookup_check.h"

namespace emb::kernels {
namespace {

// Feature `f`'s bags (their offsets into p.ids).
absl::Span<const int64_t> FeatureOffsets(const FeatureLookupProblem& p, size_t f) {
  return absl::MakeConstSpan(p.offsets + f * static_cast<size_t>(p.batch),
                             static_cast<size_t>(p.batch) + 1);
}

// Pools feature `f`'s bags into its columns of the pooled answer.
void PoolFeature(const FeatureLookupProblem& p, const FeatureSpec& spec, const FeatureTable& t,
                 size_t f) {
  const absl::Span<const int64_t> offsets = FeatureOffsets(p, f);
  const auto batch = static_cast<size_t>(p.batch);
  Bags bags;
  bags.ids = absl::MakeConstSpan(p.ids, static_cast<size_t>(offsets[batch]));
  bags.offsets = offsets;
  if (spec.weighted && p.weights != nullptr) {
    bags.weights = absl::MakeConstSpan(p.weights, bags.ids.size());
  }
  std::vector<float> means;
  if (spec.pooling == Pooling::kMean) {
    means.resize(batch);
    for (size_t s = 0; s < batch; ++s) {
      const int64_t length = offsets[s + 1] - offsets[s];
      means[s] = length > 0 ? 1.0f / static_cast<float>(length) : 0.0f;
    }
    bags.scales = means;
  }
  const size_t element = ElementSize(p.out_type);
  const size_t row_bytes = static_cast<size_t>(t.dim) * element;
  std::vector<std::byte> pooled(batch * row_bytes);
  CpuPooledGather(static_cast<const std::byte*>(t.rows), t.type, t.dim, bags, p.out_type,
                  pooled.data());
  auto* out = static_cast<std::byte*>(p.pooled_out);
  for (size_t s = 0; s < batch; ++s) {
    std::memcpy(
        out + (s * static_cast<size_t>(p.pooled_width) + static_cast<size_t>(spec.out_column)) *
                  element,
        pooled.data() + s * row_bytes, row_bytes);
  }
}

// Gathers feature `f`'s rows, one per id, to its place in the unpooled answer.
void GatherFeature(const FeatureLookupProblem& p, const FeatureSpec& spec, const FeatureTable& t,
                   size_t f) {
  const absl::Span<const int64_t> offsets = FeatureOffsets(p, f);
  const auto first = static_cast<size_t>(offsets.front());
  const auto ids = absl::MakeConstSpan(p.ids + first, static_cast<size_t>(offsets.back()) - first);
  CpuGather(static_cast<const std::byte*>(t.rows), t.type, t.dim, ids, p.out_type,
            static_cast<std::byte*>(p.unpooled_out) +
                static_cast<size_t>(spec.out_offset) * ElementSize(p.out_type));
}

}  // namespace

absl::Status CpuFeatureLookup(const FeatureLookupProblem& p) {
  if (absl::Status s = CheckFeatureLookup(p); !s.ok()) {
    return s;
  }
  if (p.batch == 0 || p.num_features == 0) {
    return absl::OkStatus();
  }
  const auto tables = absl::MakeConstSpan(p.tables, static_cast<size_t>(p.num_tables));
  const auto features = absl::MakeConstSpan(p.features, static_cast<size_t>(p.num_features));
  if (absl::Status s = CheckFeatureDescriptors(p, tables, features); !s.ok()) {
    return s;
  }
  for (size_t i = 0; i < tables.size(); ++i) {
    if (tables[i].cached.slots != nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("table ", i, ": two tiers, which only the GPU lookup reads"));
    }
  }
  for (size_t f = 0; f < features.size(); ++f) {
    const FeatureSpec& spec = features[f];
    const FeatureTable& t = tables[static_cast<size_t>(spec.table)];
    if (spec.pooling == Pooling::kNone) {
      GatherFeature(p, spec, t, f);
    } else {
      PoolFeature(p, spec, t, f);
    }
  }
  return absl::OkStatus();
}

}  // namespace emb::kernels
