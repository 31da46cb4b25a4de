#include "kernels/feature_lookup.h"

#include "absl/strings/str_cat.h"
#include "kernels/cuda_status.h"
#include "kernels/feature_lookup_check.h"
#include "kernels/features/feature_launch.h"

namespace emb::kernels {

absl::Status LaunchFeatureLookup(const GatherTuning& tuning, const FeatureLookupProblem& p,
                                 cudaStream_t stream) {
  if (absl::Status s = CheckFeatureLookup(p); !s.ok()) {
    return s;
  }
  if (p.batch == 0 || p.num_features == 0) {
    return absl::OkStatus();
  }
  if (tuning.num_sms < 1 || tuning.max_threads_per_sm < 1) {
    return absl::FailedPreconditionError("feature lookup tuning not from GetGatherTuning");
  }
  if (!features::FeatureGridFits(p)) {
    return absl::InvalidArgumentError(absl::StrCat("feature lookup of ", p.num_features,
                                                   " features x ", p.batch,
                                                   " samples: too many bags for one grid"));
  }
  EMB_CUDA_RETURN_IF_ERROR(features::LaunchFeatureKernel(p, stream), "feature lookup launch");
#if defined(EMB_CUDA_DEBUG_SYNC)
  EMB_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream), "feature lookup (EMB_CUDA_DEBUG_SYNC)");
#endif
  return absl::OkStatus();
}

}  // namespace emb::kernels
