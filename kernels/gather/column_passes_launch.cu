// PassChunkUnits, ColumnPassesFit and LaunchColumnPasses (column_passes_launch.h). No Abseil
// here (STYLE §1).
#include <algorithm>
#include <cstdint>

#include "kernels/gather/column_passes_kernel.cuh"
#include "kernels/gather/column_passes_launch.h"
#include "kernels/gather/launch_util.cuh"
#include "kernels/gather/units_launch.h"

namespace emb::kernels::gather {
namespace {

template <int kUnroll>
cudaError_t LaunchPassesUnrolled(const GatherTuning& tuning, const GatherPlan& plan,
                                 const GatherProblem& problem, int64_t row_units,
                                 cudaStream_t stream) {
  constexpr int64_t kTile = int64_t{kBlockThreads} * kUnroll;
  const int64_t num_ids = problem.num_ids;
  const int64_t chunk = PassChunkUnits(tuning, problem.num_rows, row_units);
  ColumnPassesArgs args;
  args.pass_units = FastDivmod::Make(static_cast<uint32_t>(num_ids * chunk));
  args.chunk_units = FastDivmod::Make(static_cast<uint32_t>(chunk));
  args.row_units = static_cast<uint32_t>(row_units);
  args.total_units = static_cast<uint32_t>(num_ids * row_units);
  args.flags = CacheFlags(plan);
  const int64_t max_blocks = UnitsGridCap(tuning, plan.max_blocks, kMinBlocksPerSm<kUnroll, 16>);
  const int64_t tiles = (int64_t{args.total_units} + kTile - 1) / kTile;
  DropStaleError();
  GatherColumnPassesKernel<kUnroll>
      <<<static_cast<unsigned int>(std::min(tiles, max_blocks)), kBlockThreads, 0, stream>>>(
          static_cast<const uint4*>(problem.d_table), problem.d_ids, args,
          static_cast<uint4*>(problem.d_out));
  return TakeLaunchError();
}

}  // namespace

int64_t PassChunkUnits(const GatherTuning& tuning, int64_t num_rows, int64_t row_units) {
  const int64_t most = tuning.l2_cache_bytes / 2 / (std::max<int64_t>(num_rows, 1) * 16);
  for (int64_t chunk = std::min(most, row_units - 1); chunk >= 8; --chunk) {
    if (row_units % chunk == 0) {
      return chunk;
    }
  }
  return 0;
}

bool ColumnPassesFit(const GatherTuning& tuning, const GatherProblem& problem) {
  const int64_t row_bytes = problem.dim * static_cast<int64_t>(ElementSize(problem.table_type));
  return problem.table_type == problem.out_type && row_bytes % 16 == 0 &&
         IsAligned(problem.d_table, 16) && IsAligned(problem.d_out, 16) &&
         problem.num_ids * (row_bytes / 16) < (int64_t{1} << 31) &&
         PassChunkUnits(tuning, problem.num_rows, row_bytes / 16) > 0;
}

cudaError_t LaunchColumnPasses(const GatherTuning& tuning, const GatherPlan& plan,
                               const GatherProblem& problem, cudaStream_t stream) {
  const int64_t row_units =
      problem.dim * static_cast<int64_t>(ElementSize(problem.table_type)) / 16;
  return WithUnrollLevel(plan.unroll_level, [&](auto level) {
    return LaunchPassesUnrolled<1 << decltype(level)::value>(tuning, plan, problem, row_units,
                                                             stream);
  });
}

}  // namespace emb::kernels::gather
