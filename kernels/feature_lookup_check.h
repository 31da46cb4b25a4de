// The checks of a table-batched lookup (kernels/feature_lookup_problem.h) that the host can make:
// its own fields, and host copies of its table and feature descriptors. LaunchFeatureLookup makes
// the first (its descriptors are in device memory); CpuFeatureLookup makes both. Callers that
// build descriptors on the host check them here once, before uploading them. Thread-safe (no
// state); reads no device memory.
#ifndef EMB_KERNELS_FEATURE_LOOKUP_CHECK_H_
#define EMB_KERNELS_FEATURE_LOOKUP_CHECK_H_

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "kernels/feature_lookup_problem.h"

namespace emb::kernels {

// OK where `p`'s own fields describe a lookup: an answer of a value type; batch, num_features and
// num_tables >= 0; and where there are bags (batch and num_features > 0), at least one table,
// non-null tables, features, ids and offsets, pooled_width >= 0 with pooled_out set where it is
// > 0, an answer pointer, and max_dim >= 1. INVALID_ARGUMENT naming the first that is wrong.
// Reads none of the pointers.
absl::Status CheckFeatureLookup(const FeatureLookupProblem& p);

// OK where the descriptors (host copies of what p.tables and p.features point at, p.num_tables
// and p.num_features of them) are valid for `p`: every table of a table type with dim >= 1,
// num_rows >= 0, rows set where it has any, and a cache with slots or neither; every feature of
// a table in range and a Pooling enumerator; a pooled one's columns within pooled_width and a
// pooled answer; an unpooled one's out_offset >= 0 and an unpooled answer. INVALID_ARGUMENT
// naming the first table or feature that is wrong. Ids and offsets are not read.
absl::Status CheckFeatureDescriptors(const FeatureLookupProblem& p,
                                     absl::Span<const FeatureTable> tables,
                                     absl::Span<const FeatureSpec> features);

}  // namespace emb::kernels

#endif  // EMB_KERNELS_FEATURE_LOOKUP_CHECK_H_
