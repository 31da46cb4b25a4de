// RowOwnersFit and LaunchRowOwners (row_owners_launch.h). No Abseil here (STYLE §1).
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernels/gather/launch_util.cuh"
#include "kernels/gather/row_owners_kernel.cuh"
#include "kernels/gather/row_owners_launch.h"

namespace emb::kernels::gather {
namespace {

// Shared memory a row-owners block holds rows in, at most (so that a block always fits).
constexpr int64_t kOwnerMaxGroupBytes = 200 << 10;

// Table rows per row-owners block. Each block reads its rows once per id slice and scans its
// slice of the ids, so over a grid of G groups x S slices that fills the device (G * S ~ the
// resident blocks T, taken as 2 per multiprocessor) the bytes read are S * table + G * ids * 8 =
// table * T / G + G * ids * 8, least at G = sqrt(table * T / (ids * 8)): rows per block R =
// sqrt(num_rows * ids * 8 / (T * row_bytes)). unroll_level 0, 1, 2 (and 3) scales that by 1/4,
// 1/2 or 1 (the rule takes 1/4: gather_rule.cc); the result is kept within kOwnerMaxGroupBytes
// and the block's opt-in shared memory.
int64_t OwnerRowsPerGroup(const GatherTuning& tuning, const GatherPlan& plan, int64_t num_rows,
                          int64_t row_bytes, int64_t num_ids) {
  const double resident = 2.0 * tuning.num_sms;
  const double best = std::sqrt(static_cast<double>(num_rows) * static_cast<double>(num_ids) * 8.0 /
                                (resident * static_cast<double>(row_bytes)));
  const double scaled = best * (plan.unroll_level == 0 ? 0.25 : plan.unroll_level == 1 ? 0.5 : 1.0);
  const int64_t cap_bytes =
      std::min<int64_t>(kOwnerMaxGroupBytes, int64_t{tuning.smem_per_block_optin} - 1024);
  const int64_t most = std::max<int64_t>(1, cap_bytes / row_bytes);
  return std::clamp<int64_t>(std::llround(scaled), 1, std::min(most, num_rows));
}

}  // namespace

bool RowOwnersFit(const GatherTuning& tuning, const GatherProblem& problem) {
  const int64_t row_bytes = problem.dim * static_cast<int64_t>(ElementSize(problem.table_type));
  return tuning.cc_major >= 9 && problem.table_type == problem.out_type && row_bytes % 16 == 0 &&
         IsAligned(problem.d_table, 16) && IsAligned(problem.d_out, 16) && problem.num_rows >= 1 &&
         row_bytes <=
             std::min<int64_t>(kOwnerMaxGroupBytes, int64_t{tuning.smem_per_block_optin} - 1024);
}

cudaError_t LaunchRowOwners(const GatherTuning& tuning, const GatherPlan& plan,
                            const GatherProblem& problem, cudaStream_t stream) {
  const int64_t num_rows = problem.num_rows;
  const int64_t num_ids = problem.num_ids;
  const int64_t row_bytes = problem.dim * static_cast<int64_t>(ElementSize(problem.table_type));
  const int64_t rows_per_group = OwnerRowsPerGroup(tuning, plan, num_rows, row_bytes, num_ids);
  const int64_t groups = (num_rows + rows_per_group - 1) / rows_per_group;
  const int64_t dyn_bytes = rows_per_group * row_bytes;
  const void* kernel = reinterpret_cast<const void*>(&GatherRowOwnersKernel);
  int blocks_per_sm = 0;
  if (const cudaError_t e = PrepareSmemKernel(kernel, kOwnerThreads, dyn_bytes,
                                              tuning.smem_per_block_optin, &blocks_per_sm);
      e != cudaSuccess) {
    return e;
  }
  // Id slices: enough that the grid fills `waves` resident waves, each slice at least 256 ids;
  // or as asked.
  int64_t slices = 0;
  if (plan.max_blocks > 0) {
    slices = plan.max_blocks;
  } else {
    const int64_t waves = plan.max_blocks < 0 ? -int64_t{plan.max_blocks} : 1;
    const int64_t resident = int64_t{tuning.num_sms} * blocks_per_sm * waves;
    slices = std::min(std::max<int64_t>(1, resident / groups), (num_ids + 255) / 256);
  }
  slices = std::clamp<int64_t>(slices, 1, std::min<int64_t>(num_ids, 65535));
  const int64_t ids_per_slice = (num_ids + slices - 1) / slices;
  slices = (num_ids + ids_per_slice - 1) / ids_per_slice;
  if (groups > int64_t{0x7fffffff}) {
    return cudaErrorInvalidValue;
  }
  RowOwnersArgs args;
  args.num_rows = num_rows;
  args.num_ids = num_ids;
  args.ids_per_slice = ids_per_slice;
  args.row_bytes = static_cast<uint32_t>(row_bytes);
  args.rows_per_group = static_cast<uint32_t>(rows_per_group);
  args.flags = CacheFlags(plan);
  DropStaleError();
  GatherRowOwnersKernel<<<dim3(static_cast<unsigned int>(groups),
                               static_cast<unsigned int>(slices)),
                          kOwnerThreads, static_cast<size_t>(dyn_bytes), stream>>>(
      static_cast<const uint8_t*>(problem.d_table), problem.d_ids, args,
      static_cast<uint8_t*>(problem.d_out));
  return TakeLaunchError();
}

}  // namespace emb::kernels::gather
