// The table-batched CUDA lookup (FBGEMM's TBE forward): every feature of a batch, each over its
// own table of any type (float32, float16, bfloat16, int8 or int4 rows, in device memory or in
// two tiers), pooled (sum, weighted sum, mean) side by side or one row per id, in ONE kernel
// launch. The problem and its layout: kernels/feature_lookup_problem.h; the CPU's answer, which
// this one matches bit for bit: kernels/cpu_feature_lookup.h.
//
// Built only where CUDA was found (EMB_HAVE_CUDA). Thread-safe: no state; each call enqueues work
// on the caller's stream. Host header: the only CUDA header it includes is <cuda_runtime_api.h>.
#ifndef EMB_KERNELS_FEATURE_LOOKUP_H_
#define EMB_KERNELS_FEATURE_LOOKUP_H_

#include <cuda_runtime_api.h>

#include "absl/status/status.h"
#include "kernels/feature_lookup_problem.h"  // FeatureLookupProblem
#include "kernels/gather_tuning.h"           // GatherTuning

namespace emb::kernels {

// Enqueues `p` on `stream` as one kernel: for each feature f and sample s, bag (f, s) pooled into
// row s of p.pooled_out at columns [out_column, out_column + dim), or, for an unpooled feature,
// each of its rows at its place in p.unpooled_out (FeatureSpec), converted to p.out_type with
// CpuFeatureLookup's rounding, bit for bit. An empty bag pools to a row of zeros, sum or mean. A
// table in two tiers reads each row from the cache or the host rows as its slot says, and adds the
// rows it read from the host to its cached.misses where given.
//
// p.tables and p.features are device memory that this call does not read: check their host copies
// with CheckFeatureDescriptors (kernels/feature_lookup_check.h) before uploading them. Ids must
// be in [0, their table's num_rows) and offsets must not decrease (checked by the caller: an id
// out of range reads arbitrary memory). No bags (batch or num_features 0) is a no-op. The
// pointers must stay valid until the work on `stream` completes; the answers must not overlap
// each other, the tables, the ids or the descriptors. The current device must be tuning.device
// (not checked). No allocation, no synchronization (unless built with EMB_CUDA_DEBUG_SYNC).
//
// INVALID_ARGUMENT where CheckFeatureLookup finds `p`'s own fields wrong, or for a batch too large
// for one grid; FAILED_PRECONDITION for a tuning not from GetGatherTuning (kernels/lookup.h);
// INTERNAL for a CUDA error seen at the launch (cudaPeekAtLastError, which also reports a sticky
// fault of earlier work).
absl::Status LaunchFeatureLookup(const GatherTuning& tuning, const FeatureLookupProblem& p,
                                 cudaStream_t stream);

}  // namespace emb::kernels

#endif  // EMB_KERNELS_FEATURE_LOOKUP_H_
