// The launcher of GatherRowOwnersKernel (row_owners_kernel.cuh), the gather by table row for
// small tables of long rows. Private to kernels/: PlanGather and LaunchGatherPlan
// (gather_plan.h) call it. Host header; thread-safe.
#ifndef EMB_KERNELS_GATHER_ROW_OWNERS_LAUNCH_H_
#define EMB_KERNELS_GATHER_ROW_OWNERS_LAUNCH_H_

#include <cuda_runtime_api.h>

#include "kernels/gather_plan.h"
#include "kernels/gather_tuning.h"

namespace emb::kernels::gather {

// Whether the row-owners path can serve `problem`: the copy engine (sm_90), raw bytes (equal
// types), rows and both base pointers on 16 bytes, and a row that fits a block's shared memory.
bool RowOwnersFit(const GatherTuning& tuning, const GatherProblem& problem);

// Enqueues `problem` with GatherRowOwnersKernel as `plan` says (rows per block by its unroll
// level, cache flags, id slices by its grid cap). Arguments as LaunchGatherPlan checks them
// (RowOwnersFit included). Returns the shared memory set-up's or the launch's error.
cudaError_t LaunchRowOwners(const GatherTuning& tuning, const GatherPlan& plan,
                            const GatherProblem& problem, cudaStream_t stream);

}  // namespace emb::kernels::gather

#endif  // EMB_KERNELS_GATHER_ROW_OWNERS_LAUNCH_H_
