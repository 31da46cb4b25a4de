// The table-batched lookup kernel's launcher (feature_launch.cu): picks the lanes a bag and
// launches. Private to kernels/; no Abseil (built by nvcc).
#ifndef EMB_KERNELS_FEATURES_FEATURE_LAUNCH_H_
#define EMB_KERNELS_FEATURES_FEATURE_LAUNCH_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/feature_lookup_problem.h"

namespace emb::kernels::features {

// The lanes that own one bag for rows of up to `max_dim` elements: enough for one 16-byte vector
// of float32 each (a power of two, 1 to 32).
int FeatureGroupLanes(int64_t max_dim);

// Whether one grid holds every bag of `p` (num_features * batch, batch and num_features >= 0).
bool FeatureGridFits(const FeatureLookupProblem& p);

// Launches FeatureLookupKernel for `p` (checked by the caller, with bags that fit one grid) on
// `stream`; the launch's error.
cudaError_t LaunchFeatureKernel(const FeatureLookupProblem& p, cudaStream_t stream);

}  // namespace emb::kernels::features

#endif  // EMB_KERNELS_FEATURES_FEATURE_LAUNCH_H_
