// The CUDA lookup: table rows picked by ids into a dense answer, one row per id or pooled into
// bags (sum, weighted sum, mean), from a table of any type (float32, float16, bfloat16, int8 or
// int4 rows) in device memory or in two tiers, converted to the answer's value type with the same
// rounding as the CPU's (kernels/cpu_gather.h), bit for bit.
//
// The one entry of the service: LaunchLookup takes a LookupProblem (lookup_problem.h), and one
// rule (LookupFamilyOf) picks the kernel family that serves it. The families, their plans and
// their knobs are private to kernels/ and its testing target (gather_plan.h, gather/, bags/).
//
// Built only where CUDA was found (EMB_HAVE_CUDA). Thread-safe: no state; each call enqueues work
// on the caller's stream. Host header: the only CUDA header it includes is <cuda_runtime_api.h>.
#ifndef EMB_KERNELS_LOOKUP_H_
#define EMB_KERNELS_LOOKUP_H_

#include <cuda_runtime_api.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/gather_tuning.h"   // GatherTuning
#include "kernels/lookup_problem.h"  // LookupProblem

namespace emb::kernels {

// The number of CUDA devices. INTERNAL (with the CUDA error name, e.g.
// cudaErrorNoDevice or cudaErrorInsufficientDriver) when the runtime cannot
// count them, e.g. on a machine without a GPU or driver.
absl::StatusOr<int> DeviceCount();

// Reads `device`'s properties and the gather kernels' occupancy on it, once per device: pass the
// result to every LaunchLookup on it. The calling thread's current device is unchanged
// afterwards. INVALID_ARGUMENT for a device out of range; INTERNAL for other CUDA errors.
absl::StatusOr<GatherTuning> GetGatherTuning(int device);

// The kernel family that serves a lookup.
enum class LookupFamily {
  // The gather kernels (kernels/gather/, their plan by PlanGather's rule): one id per answer row,
  // unweighted and unscaled, from rows of a value type in device memory.
  kGather,
  // The bag kernel (kernels/bags/): everything else (bags, weights or scales, quantized rows, a
  // table in two tiers).
  kBags,
};

// The rule: which family serves `problem`. Reads no memory and calls no CUDA.
LookupFamily LookupFamilyOf(const LookupProblem& problem);

// Enqueues `problem` on `stream`: answer row b (at out + b * dim * ElementSize(out_type)) is row
// ids[b] (no offsets), or the pool of bag b's rows (CpuPooledGather's results, bit for bit), for b
// in [0, num_bags). A table in two tiers reads each row from the cache or the host rows as its
// slot says, and adds the rows it read from the host to cached.misses where given.
//
// Ids must be in [0, rows) and offsets must not decrease (checked on the host by the caller: an id
// out of range reads arbitrary memory). num_bags == 0 is a no-op. The pointers must stay valid
// until the work on `stream` completes; `out` must not overlap the table or the ids. The current
// device must be tuning.device (not checked: the caller set it). No allocation, no
// synchronization (unless built with EMB_CUDA_DEBUG_SYNC, which adds a cudaStreamSynchronize to
// surface kernel faults at the call).
//
// INVALID_ARGUMENT for a bad table or answer type, dim < 1, rows < 0, num_bags < 0, null pointers
// where num_bags > 0, or a cache without slots or slots without a cache; FAILED_PRECONDITION for
// a tuning not from GetGatherTuning; INTERNAL for a CUDA error seen at the launch
// (cudaPeekAtLastError, which also reports a sticky fault of earlier work); a sticky one
// (IsStickyCudaError) means the context is dead.
absl::Status LaunchLookup(const GatherTuning& tuning, const LookupProblem& problem,
                          cudaStream_t stream);

}  // namespace emb::kernels

#endif  // EMB_KERNELS_LOOKUP_H_
