#include "kernels/feature_lookup_check.h"

#include <cstddef>
#include <cstdint>

#include "absl/strings/str_cat.h"

namespace emb::kernels {
namespace {

absl::Status CheckTable(const FeatureTable& t, size_t i) {
  if (!IsDataType(t.type)) {
    return absl::InvalidArgumentError(
        absl::StrCat("table ", i, ": data type ", static_cast<int>(t.type)));
  }
  if (t.dim < 1 || t.num_rows < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("table ", i, ": ", t.num_rows, " rows of dim ", t.dim));
  }
  if (t.num_rows > 0 && t.rows == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("table ", i, ": null rows"));
  }
  if ((t.cached.slots == nullptr) != (t.cached.cache == nullptr)) {
    return absl::InvalidArgumentError(
        absl::StrCat("table ", i, ": a cache without slots, or slots without a cache"));
  }
  return absl::OkStatus();
}

absl::Status CheckFeature(const FeatureLookupProblem& p, absl::Span<const FeatureTable> tables,
                          const FeatureSpec& f, size_t i) {
  if (f.table < 0 || static_cast<size_t>(f.table) >= tables.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("feature ", i, ": table ", f.table, " of ", tables.size()));
  }
  const int64_t dim = tables[static_cast<size_t>(f.table)].dim;
  switch (f.pooling) {
    case Pooling::kNone:
      if (f.out_offset < 0 || p.unpooled_out == nullptr) {
        return absl::InvalidArgumentError(absl::StrCat(
            "feature ", i, ": unpooled at element ", f.out_offset,
            p.unpooled_out == nullptr ? " of no unpooled answer" : " of the unpooled answer"));
      }
      return absl::OkStatus();
    case Pooling::kSum:
    case Pooling::kMean:
      if (f.out_column < 0 || f.out_column > p.pooled_width - dim || p.pooled_out == nullptr) {
        return absl::InvalidArgumentError(
            absl::StrCat("feature ", i, ": pooled columns [", f.out_column, ", ",
                         f.out_column + dim, ") of a pooled answer ", p.pooled_width, " wide",
                         p.pooled_out == nullptr ? " that is null" : ""));
      }
      return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrCat("feature ", i, ": pooling ", static_cast<int>(f.pooling)));
}

}  // namespace

absl::Status CheckFeatureLookup(const FeatureLookupProblem& p) {
  if (!IsValueType(p.out_type)) {
    return absl::InvalidArgumentError(
        absl::StrCat("feature lookup to data type ", static_cast<int>(p.out_type)));
  }
  if (p.batch < 0 || p.num_features < 0 || p.num_tables < 0) {
    return absl::InvalidArgumentError(absl::StrCat("feature lookup of a batch of ", p.batch,
                                                   " over ", p.num_features, " features and ",
                                                   p.num_tables, " tables"));
  }
  if (p.batch == 0 || p.num_features == 0) {
    return absl::OkStatus();
  }
  if (p.num_tables == 0 || p.tables == nullptr || p.features == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("feature lookup of ", p.num_features,
                                                   " features with ", p.num_tables, " tables",
                                                   p.tables == nullptr ? ", null tables" : "",
                                                   p.features == nullptr ? ", null features" : ""));
  }
  if (p.ids == nullptr || p.offsets == nullptr) {
    return absl::InvalidArgumentError("feature lookup with null ids or offsets");
  }
  if (p.pooled_width < 0 || (p.pooled_width > 0 && p.pooled_out == nullptr)) {
    return absl::InvalidArgumentError(
        absl::StrCat("feature lookup into a pooled answer ", p.pooled_width, " wide at ",
                     p.pooled_out == nullptr ? "null" : "an address"));
  }
  if (p.pooled_out == nullptr && p.unpooled_out == nullptr) {
    return absl::InvalidArgumentError("feature lookup with no answer, pooled or unpooled");
  }
  if (p.max_dim < 1) {
    return absl::InvalidArgumentError(absl::StrCat("feature lookup with max_dim ", p.max_dim));
  }
  return absl::OkStatus();
}

absl::Status CheckFeatureDescriptors(const FeatureLookupProblem& p,
                                     absl::Span<const FeatureTable> tables,
                                     absl::Span<const FeatureSpec> features) {
  if (tables.size() != static_cast<size_t>(p.num_tables) ||
      features.size() != static_cast<size_t>(p.num_features)) {
    return absl::InvalidArgumentError(absl::StrCat(tables.size(), " table and ", features.size(),
                                                   " feature descriptors for ", p.num_tables,
                                                   " tables and ", p.num_features, " features"));
  }
  for (size_t i = 0; i < tables.size(); ++i) {
    if (absl::Status s = CheckTable(tables[i], i); !s.ok()) {
      return s;
    }
  }
  for (size_t i = 0; i < features.size(); ++i) {
    if (absl::Status s = CheckFeature(p, tables, features[i], i); !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

}  // namespace emb::kernels
