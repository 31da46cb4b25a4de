// The kernel variants that the kernel benchmark names by bits (gather_benchmark.py, through
// emb_gather_ex in gather_capi.cc), as gather plans (kernels/gather_plan.h): a forced path, unroll
// level, walk and cache flags, or the rule's plan; and the current device's tuning for the C entry
// points. Bench only; the service takes the rule's plan. Thread-safe.
#ifndef EMB_BENCH_KERNELS_GATHER_VARIANT_H_
#define EMB_BENCH_KERNELS_GATHER_VARIANT_H_

#include <cuda_runtime_api.h>

#include "kernels/gather_plan.h"
#include "kernels/gather_tuning.h"

namespace emb::bench {

// A variant of the gather: the rule's plan, or one forced.
struct GatherVariant {
  // The rule picks the path (PlanGather); where it picks kUnits, `plan`'s other fields apply.
  bool by_rule = true;
  // The forced plan (path kUnits when by_rule): path, unroll level, walk and cache flags.
  kernels::GatherPlan plan;
};

// The variant that a benchmark's bits name: bits 0-1 the unroll level (0..3), bit 2 interleaved
// (1) or one span per block (0), bit 3 plain (1) or evict-first (0) answer stores, bit 4 table
// loads with an L2 evict_last policy (1), bits 5-6 the path: 0 kUnits, 1 kSliceOwners, 2
// kRowOwners, 3 the rule's; bit 7 (with path 0) kColumnPasses. False, and *variant untouched,
// for bits that name no variant.
bool GatherVariantFromBits(int bits, GatherVariant* variant);

// The plan that emb_gather_ex launches for `variant` with the grid cap `max_blocks`
// (GatherPlan::max_blocks) on the device of `tuning`: by_rule, PlanGather's plan, with the
// variant's unroll level, walk and cache flags where the rule takes kUnits; else the variant's
// plan, on kUnits where its path does not fit `problem` (GatherPathFits).
kernels::GatherPlan PlanOfVariant(const kernels::GatherTuning& tuning, const GatherVariant& variant,
                                  int max_blocks, const kernels::GatherProblem& problem);

// The current device's tuning (GetGatherTuning), read once per device; a CUDA error
// (cudaErrorInvalidValue where the tuning cannot be read).
cudaError_t CurrentDeviceTuning(kernels::GatherTuning* out);

}  // namespace emb::bench

#endif  // EMB_BENCH_KERNELS_GATHER_VARIANT_H_
