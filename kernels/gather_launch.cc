// GatherPathFits, LaunchGatherPlan and LaunchCheckedGatherPlan (gather_plan.h): the one door to
// the gather launchers.
#include <cuda_runtime_api.h>

#include "kernels/data_type.h"
#include "kernels/gather/column_passes_launch.h"
#include "kernels/gather/row_owners_launch.h"
#include "kernels/gather/slice_owners_launch.h"
#include "kernels/gather/units_launch.h"
#include "kernels/gather_plan.h"
#include "kernels/gather_tuning.h"

namespace emb::kernels {
namespace {

bool IsGatherPath(GatherPath path) {
  return path == GatherPath::kUnits || path == GatherPath::kRowOwners ||
         path == GatherPath::kSliceOwners || path == GatherPath::kColumnPasses;
}

}  // namespace

bool GatherPathFits(const GatherTuning& tuning, GatherPath path, const GatherProblem& problem) {
  switch (path) {
    case GatherPath::kUnits:
      return true;
    case GatherPath::kRowOwners:
      return gather::RowOwnersFit(tuning, problem);
    case GatherPath::kSliceOwners:
      return gather::SliceOwnersFit(tuning, problem);
    case GatherPath::kColumnPasses:
      return gather::ColumnPassesFit(tuning, problem);
  }
  return false;
}

cudaError_t LaunchGatherPlan(const GatherTuning& tuning, const GatherPlan& plan,
                             const GatherProblem& problem, cudaStream_t stream) {
  if (!IsDataType(problem.table_type) || !IsDataType(problem.out_type) || problem.dim < 1 ||
      problem.num_rows < 0 || problem.num_ids < 0 || tuning.num_sms < 1 ||
      !IsGatherPath(plan.path) || plan.unroll_level < 0 ||
      plan.unroll_level >= kGatherUnrollLevels) {
    return cudaErrorInvalidValue;
  }
  if (problem.num_ids == 0) {
    return cudaSuccess;
  }
  if (problem.d_table == nullptr || problem.d_ids == nullptr || problem.d_out == nullptr ||
      !GatherPathFits(tuning, plan.path, problem)) {
    return cudaErrorInvalidValue;
  }
  return LaunchCheckedGatherPlan(tuning, plan, problem, stream);
}

cudaError_t LaunchCheckedGatherPlan(const GatherTuning& tuning, const GatherPlan& plan,
                                    const GatherProblem& problem, cudaStream_t stream) {
  switch (plan.path) {
    case GatherPath::kUnits:
      return gather::LaunchUnits(tuning, plan, problem, stream);
    case GatherPath::kRowOwners:
      return gather::LaunchRowOwners(tuning, plan, problem, stream);
    case GatherPath::kSliceOwners:
      return gather::LaunchSliceOwners(tuning, plan, problem, stream);
    case GatherPath::kColumnPasses:
      return gather::LaunchColumnPasses(tuning, plan, problem, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace emb::kernels
