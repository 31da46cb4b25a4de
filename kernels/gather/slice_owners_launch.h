// The launcher of GatherSliceOwnersKernel (slice_owners_kernel.cuh), the gather by column slice
// for small tables of long rows. Private to kernels/: PlanGather and LaunchGatherPlan
// (gather_plan.h) call it. Host header; thread-safe.
#ifndef EMB_KERNELS_GATHER_SLICE_OWNERS_LAUNCH_H_
#define EMB_KERNELS_GATHER_SLICE_OWNERS_LAUNCH_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/gather_plan.h"
#include "kernels/gather_tuning.h"

namespace emb::kernels::gather {

// Table rows whose slices a slice-owners block holds in shared memory: all `num_rows`, or as many
// as its shared memory takes.
int64_t SliceHeldRows(const GatherTuning& tuning, int64_t num_rows);

// Whether the slice-owners path can serve `problem`: cp.async (sm_80), raw bytes (equal types),
// rows a multiple of 128 bytes, both base pointers on 16 bytes, and room for at least one held
// row.
bool SliceOwnersFit(const GatherTuning& tuning, const GatherProblem& problem);

// Enqueues `problem` with GatherSliceOwnersKernel as `plan` says (answer rows in flight per
// thread by its unroll level, cache flags, blocks per slice by its grid cap). Arguments as
// LaunchGatherPlan checks them (SliceOwnersFit included). Returns the shared memory set-up's or
// the launch's error.
cudaError_t LaunchSliceOwners(const GatherTuning& tuning, const GatherPlan& plan,
                              const GatherProblem& problem, cudaStream_t stream);

}  // namespace emb::kernels::gather

#endif  // EMB_KERNELS_GATHER_SLICE_OWNERS_LAUNCH_H_
