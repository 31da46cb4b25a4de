// SliceHeldRows, SliceOwnersFit and LaunchSliceOwners (slice_owners_launch.h). No Abseil here
// (STYLE §1).
#include <algorithm>
#include <cstdint>

#include "kernels/gather/launch_util.cuh"
#include "kernels/gather/slice_owners_kernel.cuh"
#include "kernels/gather/slice_owners_launch.h"

namespace emb::kernels::gather {
namespace {

// Shared memory a slice-owners block leaves free of held rows (the opt-in limit less this).
constexpr int64_t kSliceSmemReserve = 1024;

template <int kRows>
cudaError_t LaunchSlicesUnrolled(const GatherTuning& tuning, const GatherPlan& plan,
                                 const GatherProblem& problem, int64_t row_bytes,
                                 cudaStream_t stream) {
  const int64_t num_ids = problem.num_ids;
  SliceOwnersArgs args;
  args.num_ids = num_ids;
  args.row_bytes = row_bytes;
  args.held_rows = SliceHeldRows(tuning, problem.num_rows);
  args.flags = CacheFlags(plan);
  const int64_t dyn_bytes = args.held_rows * kSliceBytes;
  const void* kernel = reinterpret_cast<const void*>(&GatherSliceOwnersKernel<kRows>);
  int blocks_per_sm = 0;
  if (const cudaError_t e = PrepareSmemKernel(kernel, kSliceThreads, dyn_bytes,
                                              tuning.smem_per_block_optin, &blocks_per_sm);
      e != cudaSuccess) {
    return e;
  }
  // Blocks per slice: as asked, or as many as fill the resident waves asked for (at least one),
  // and never more than there are steps of answer rows.
  const int64_t slices = row_bytes / kSliceBytes;
  int64_t per_slice = 0;
  if (plan.max_blocks > 0) {
    per_slice = plan.max_blocks;
  } else {
    const int64_t waves = plan.max_blocks < 0 ? -int64_t{plan.max_blocks} : 1;
    per_slice = int64_t{tuning.num_sms} * blocks_per_sm * waves / slices;
  }
  const int64_t steps = (num_ids + kSliceRowsPerStep - 1) / kSliceRowsPerStep;
  per_slice = std::clamp<int64_t>(per_slice, 1, std::min<int64_t>(steps, 65535));
  if (slices > int64_t{0x7fffffff}) {
    return cudaErrorInvalidValue;
  }
  DropStaleError();
  GatherSliceOwnersKernel<kRows>
      <<<dim3(static_cast<unsigned int>(slices), static_cast<unsigned int>(per_slice)),
         kSliceThreads, static_cast<size_t>(dyn_bytes), stream>>>(
          static_cast<const uint8_t*>(problem.d_table), problem.d_ids, args,
          static_cast<uint8_t*>(problem.d_out));
  return TakeLaunchError();
}

}  // namespace

int64_t SliceHeldRows(const GatherTuning& tuning, int64_t num_rows) {
  const int64_t capacity = (int64_t{tuning.smem_per_block_optin} - kSliceSmemReserve) / kSliceBytes;
  return std::clamp<int64_t>(capacity, 0, num_rows);
}

bool SliceOwnersFit(const GatherTuning& tuning, const GatherProblem& problem) {
  const int64_t row_bytes = problem.dim * static_cast<int64_t>(ElementSize(problem.table_type));
  return tuning.cc_major >= 8 && problem.table_type == problem.out_type &&
         row_bytes % kSliceBytes == 0 && IsAligned(problem.d_table, 16) &&
         IsAligned(problem.d_out, 16) && problem.num_rows >= 1 &&
         SliceHeldRows(tuning, problem.num_rows) >= 1;
}

cudaError_t LaunchSliceOwners(const GatherTuning& tuning, const GatherPlan& plan,
                              const GatherProblem& problem, cudaStream_t stream) {
  const int64_t row_bytes = problem.dim * static_cast<int64_t>(ElementSize(problem.table_type));
  return WithUnrollLevel(plan.unroll_level, [&](auto level) {
    return LaunchSlicesUnrolled<1 << decltype(level)::value>(tuning, plan, problem, row_bytes,
                                                             stream);
  });
}

}  // namespace emb::kernels::gather
