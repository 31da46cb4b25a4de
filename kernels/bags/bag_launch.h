// The bag kernel's launcher (bag_launch.cu): picks the load width, lane group and column tiles
// for the table's row layout and launches. Private to kernels/; no Abseil (built by nvcc).
#ifndef EMB_KERNELS_BAGS_BAG_LAUNCH_H_
#define EMB_KERNELS_BAGS_BAG_LAUNCH_H_

#include <cuda_runtime_api.h>

#include "kernels/lookup_problem.h"

namespace emb::kernels::bags {

// Launches the kernel for `bags` (checked by the caller) on `stream`; the launch's error.
cudaError_t LaunchBagKernel(const LookupProblem& bags, cudaStream_t stream);

}  // namespace emb::kernels::bags

#endif  // EMB_KERNELS_BAGS_BAG_LAUNCH_H_
