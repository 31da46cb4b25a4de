// The launcher of GatherColumnPassesKernel (column_passes_kernel.cuh), the gather in column
// passes for tables larger than L2. Private to kernels/: PlanGather and LaunchGatherPlan
// (gather_plan.h) call it. Host header; thread-safe (no state).
#ifndef EMB_KERNELS_GATHER_COLUMN_PASSES_LAUNCH_H_
#define EMB_KERNELS_GATHER_COLUMN_PASSES_LAUNCH_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/gather_plan.h"
#include "kernels/gather_tuning.h"

namespace emb::kernels::gather {

// The 16-byte units of a row that one column pass copies: the largest divisor of the row's
// `row_units` whose chunk of every table row takes at most half of L2, and at least 128 bytes
// (whole lines); 0 when there is none, or when one pass would take the whole row.
int64_t PassChunkUnits(const GatherTuning& tuning, int64_t num_rows, int64_t row_units);

// Whether column passes can serve `problem`: raw bytes (equal types), rows and both base
// pointers on 16 bytes, fewer than 2^31 answer units, and a chunk (PassChunkUnits).
bool ColumnPassesFit(const GatherTuning& tuning, const GatherProblem& problem);

// Enqueues `problem` with GatherColumnPassesKernel as `plan` says (units in flight per thread by
// its unroll level, cache flags, grid cap as kUnits'). Arguments as LaunchGatherPlan checks them
// (ColumnPassesFit included). Returns the launch's error.
cudaError_t LaunchColumnPasses(const GatherTuning& tuning, const GatherPlan& plan,
                               const GatherProblem& problem, cudaStream_t stream);

}  // namespace emb::kernels::gather

#endif  // EMB_KERNELS_GATHER_COLUMN_PASSES_LAUNCH_H_
