#include <cstdint>

#include "kernels/features/feature_kernel.cuh"
#include "kernels/features/feature_launch.h"

namespace emb::kernels::features {

int FeatureGroupLanes(int64_t max_dim) {
  const int64_t vectors = (max_dim + 3) / 4;
  int group = 1;
  while (group < 32 && group < vectors) {
    group *= 2;
  }
  return group;
}

bool FeatureGridFits(const FeatureLookupProblem& p) {
  const int64_t max_bags =
      int64_t{0x7fffffff} * kFeatureBlockThreads / FeatureGroupLanes(p.max_dim);
  return p.num_features == 0 || p.batch <= max_bags / p.num_features;
}

cudaError_t LaunchFeatureKernel(const FeatureLookupProblem& p, cudaStream_t stream) {
  (void)cudaGetLastError();  // a stale non-sticky error is not this launch's
  const int group = FeatureGroupLanes(p.max_dim);
  const int64_t threads = static_cast<int64_t>(p.num_features) * p.batch * group;
  const int64_t blocks = (threads + kFeatureBlockThreads - 1) / kFeatureBlockThreads;
  FeatureLookupKernel<<<static_cast<unsigned>(blocks), kFeatureBlockThreads, 0, stream>>>(p, group);
  return cudaPeekAtLastError();
}

}  // namespace emb::kernels::features
