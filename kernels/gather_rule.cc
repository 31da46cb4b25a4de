// PlanGather (gather_plan.h): the production rule, which kernel serves which gather and how.
#include <cstdint>

#include "kernels/data_type.h"
#include "kernels/gather/column_passes_launch.h"
#include "kernels/gather/row_owners_launch.h"
#include "kernels/gather/slice_owners_launch.h"
#include "kernels/gather_plan.h"
#include "kernels/gather_tuning.h"

namespace emb::kernels {
namespace {

// Each path's launch, the best variant of the kernel benchmark's H200 sweeps (docs/benchmarks.md
// §1.1): the path at `unroll_level`, answer stores evict-first, table loads with an L2 evict_last
// policy, the default grid (GatherPlan::max_blocks 0).
constexpr GatherPlan RulePlan(GatherPath path, int unroll_level) {
  GatherPlan plan;
  plan.path = path;
  plan.unroll_level = unroll_level;
  plan.interleaved = true;
  plan.streaming_stores = true;
  plan.table_evict_last = true;
  plan.max_blocks = 0;
  return plan;
}

// kUnits: two 16-byte (four narrower) units in flight per thread, the grid interleaved over the
// answer, up to kGatherMaxWaves resident waves of one block per tile.
constexpr GatherPlan kRuleUnits = RulePlan(GatherPath::kUnits, 1);
// kRowOwners: groups of a quarter of the bytes-read optimum (level 0), the fastest for every
// table the rule gives this path (1% to 6% faster than a half).
constexpr GatherPlan kRuleRowOwners = RulePlan(GatherPath::kRowOwners, 0);
// kSliceOwners: four answer rows in flight per thread (level 2), the best at vocab 1024 and 2048.
constexpr GatherPlan kRuleSliceOwners = RulePlan(GatherPath::kSliceOwners, 2);
// kColumnPasses: two units in flight per thread (level 1; c1icL in the sweep), the best or within
// 1% of it on every case the rule gives this path.
constexpr GatherPlan kRuleColumnPasses = RulePlan(GatherPath::kColumnPasses, 1);

// The narrowest chunk the rule takes column passes with: at vocab 65536 x 16 KB rows the chunk
// is 256 bytes and the passes tied the plain copy; at 131072 (128 bytes), 12% slower.
constexpr int64_t kRulePassMinChunkBytes = 512;

}  // namespace

// The rule, from the H200 sweeps at 16384 ids (docs/benchmarks.md §1.1; what was tried and not
// kept: docs/decisions.md). For rows of 16 to 32 KB (the lengths measured):
// - kSliceOwners when the ids use each row twice or more on average and a block holds at least
//   7/8 of the table's rows: at vocab 1024 and 2048 of 16 KB rows (all and 88% held) 4% and 7%
//   faster than the best row-owners variant; at vocab 4096 (44% held), 11% slower;
// - else kColumnPasses when the table is larger than L2, the ids are at least half the rows and
//   a pass's chunk is at least kRulePassMinChunkBytes: at vocab 4096, 8192, 16384 and 32768 of 16
//   KB rows 4%, 7%, 9% and 3% faster than the path before it (row owners, then kUnits); at vocab
//   2048 (a table that fits L2) 13% slower than slice owners;
// - else kRowOwners when the ids use each row twice or more: reading each table row once per id
//   slice instead of once per use is 3%, 13%, 8% and 1% faster than kUnits at ids = 2, 4, 8 and
//   16 x rows; at ids = rows 21% slower, and for 1.2 to 4 KB rows 11% to 1.9x slower at every
//   table size (each block scans all its slice's ids, which costs more than it saves when rows
//   are short).
// Everything else takes kUnits: every conversion, rows that are not a multiple of 16 bytes,
// misaligned pointers, shorter rows (slice owners on 3 KB rows 9% to 26% slower than kUnits,
// column passes from 3% faster to 11% slower), and devices before sm_80 (sm_90 for row owners).
GatherPlan PlanGather(const GatherTuning& tuning, const GatherProblem& problem) {
  const int64_t num_rows = problem.num_rows;
  const int64_t num_ids = problem.num_ids;
  const int64_t row_bytes = problem.dim * static_cast<int64_t>(ElementSize(problem.table_type));
  const bool long_rows = row_bytes >= (int64_t{16} << 10) && row_bytes <= (int64_t{32} << 10);
  if (long_rows && num_ids >= 2 * num_rows && gather::SliceOwnersFit(tuning, problem) &&
      8 * gather::SliceHeldRows(tuning, num_rows) >= 7 * num_rows) {
    return kRuleSliceOwners;
  }
  if (long_rows && 2 * num_ids >= num_rows && num_rows * row_bytes > tuning.l2_cache_bytes &&
      gather::ColumnPassesFit(tuning, problem) &&
      gather::PassChunkUnits(tuning, num_rows, row_bytes / 16) * 16 >= kRulePassMinChunkBytes) {
    return kRuleColumnPasses;
  }
  if (row_bytes >= (int64_t{16} << 10) && num_ids >= 2 * num_rows &&
      gather::RowOwnersFit(tuning, problem)) {
    return kRuleRowOwners;
  }
  return kRuleUnits;
}

}  // namespace emb::kernels
