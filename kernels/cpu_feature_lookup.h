// The table-batched lookup on the CPU: every feature of a batch over its table in host memory,
// pooled side by side or one row per id (kernels/feature_lookup_problem.h), with CpuPooledGather's
// and CpuGather's rounding. The reference that LaunchFeatureLookup (kernels/feature_lookup.h) is
// tested against, bit for bit, and the CPU backend's path for such lookups. Thread-safe (no state).
#ifndef EMB_KERNELS_CPU_FEATURE_LOOKUP_H_
#define EMB_KERNELS_CPU_FEATURE_LOOKUP_H_

#include "absl/status/status.h"
#include "kernels/feature_lookup_problem.h"

namespace emb::kernels {

// Writes `p`'s answers, every pointer of `p` (tables and features included) being host memory:
// bag (f, s) of a pooled feature is CpuPooledGather's pool of its rows (weighted where the
// feature is and `p` has weights; a mean scaled by 1 / its length, rounded once; an empty bag a
// row of zeros) at row s, columns [out_column, out_column + dim) of p.pooled_out; an unpooled
// feature's rows are CpuGather's, at its out_offset of p.unpooled_out. Ids must be in [0, their
// table's num_rows) and offsets must not decrease (checked by the caller). The answers must not
// overlap the inputs or each other.
//
// INVALID_ARGUMENT where CheckFeatureLookup or CheckFeatureDescriptors
// (kernels/feature_lookup_check.h) finds `p` wrong, or for a table in two tiers (a GPU's).
absl::Status CpuFeatureLookup(const FeatureLookupProblem& p);

}  // namespace emb::kernels

#endif  // EMB_KERNELS_CPU_FEATURE_LOOKUP_H_
