// The launcher of GatherUnitsKernel (units_kernel.cuh), the gather of every type pair and row
// length. Private to kernels/: LaunchGatherPlan (gather_plan.h) calls it with checked arguments.
// Host header; thread-safe (no state).
#ifndef EMB_KERNELS_GATHER_UNITS_LAUNCH_H_
#define EMB_KERNELS_GATHER_UNITS_LAUNCH_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/gather_plan.h"
#include "kernels/gather_tuning.h"

namespace emb::kernels::gather {

// Enqueues `problem` with GatherUnitsKernel as `plan` says (its unroll level, interleaved or
// spans, cache flags and grid cap): the widest unit (16, 8, 4 or 2 bytes, or one element) that
// divides the row and that both base pointers are aligned to, a block per tile up to the cap, and
// a launch per 2^30 answer units. Arguments as LaunchGatherPlan checks them. cudaErrorInvalidValue
// for a row of 2^30 units or more; otherwise the launches' error.
cudaError_t LaunchUnits(const GatherTuning& tuning, const GatherPlan& plan,
                        const GatherProblem& problem, cudaStream_t stream);

// The grid cap of a units-style launch (GatherPlan::max_blocks, also column passes'): blocks as
// asked, or resident waves of a kernel that __launch_bounds__ fits `min_blocks_per_sm` times on
// a full multiprocessor (-k: k waves; 0: kGatherMaxWaves).
int64_t UnitsGridCap(const GatherTuning& tuning, int max_blocks, int min_blocks_per_sm);

// Writes the fewest resident blocks per multiprocessor, over all units kernels, on the current
// device, to *blocks_per_sm (GatherTuning::blocks_per_sm). Returns the occupancy query's error.
cudaError_t GatherBlocksPerSm(int* blocks_per_sm);

}  // namespace emb::kernels::gather

#endif  // EMB_KERNELS_GATHER_UNITS_LAUNCH_H_
