// The CUDA gather's launch plan: which gather kernel serves a lookup of the gather family
// (LookupFamilyOf, lookup.h), and its launch parameters.
//
// PlanGather (the rule, gather_rule.cc) returns the production plan for a gather's shape, and
// LaunchGatherPlan (gather_launch.cc) validates the arguments and launches a plan through the
// kernel family's launcher (gather/*_launch.cu). LaunchLookup (lookup.h), which the service calls,
// checks its arguments once and launches PlanGather's plan with LaunchCheckedGatherPlan. The plan
// is the rule's output; tests and bench/ build their own to force a path or a grid.
//
// Private to kernels/ and its testing target (emb::kernels_testing): the service cannot include
// it (cmake/emb_helpers.cmake, emb_expose; tests/tools/layering_check.py).
//
// In plain CUDA runtime terms (cudaError_t), so that nvcc never sees Abseil; lookup.cc turns the
// errors into a Status. Host header: the only CUDA header it includes is <cuda_runtime_api.h>.
// Thread-safe (the launchers share only a locked cache of kernel attributes).
#ifndef EMB_KERNELS_GATHER_PLAN_H_
#define EMB_KERNELS_GATHER_PLAN_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/data_type.h"
#include "kernels/gather_tuning.h"

namespace emb::kernels {

// Threads per block of the unit gather kernels.
inline constexpr int kGatherBlockThreads = 256;
// GatherPlan::unroll_level is in [0, kGatherUnrollLevels).
inline constexpr int kGatherUnrollLevels = 4;
// The default grid cap, in resident waves: with one tile per block the hardware balances the
// blocks (measured up to 6% faster than a single persistent wave, for 16 KB rows).
inline constexpr int kGatherMaxWaves = 64;

// Which kernel does a gather (2 is unused: a bulk-rows path, removed; docs/decisions.md).
enum class GatherPath : int {
  // GatherUnitsKernel: threads load, convert and store 2- to 16-byte units. Any types, any dim.
  kUnits = 1,
  // GatherRowOwnersKernel: each block holds a group of table rows in shared memory and writes
  // them wherever the ids ask for them. Needs sm_90, equal table and answer types, 16-byte rows
  // and pointers, and rows up to the shared memory a block can have.
  kRowOwners = 3,
  // GatherSliceOwnersKernel: each block holds one 128-byte column slice of the table's first rows
  // (as many as its shared memory takes) and writes that slice of every answer row. Needs sm_80,
  // equal table and answer types, rows a multiple of 128 bytes and 16-byte pointers.
  kSliceOwners = 4,
  // GatherColumnPassesKernel: kUnits' copy in passes over column chunks, each chunk of the table
  // small enough for L2, so that a row the ids repeat is read from memory once per chunk. Needs
  // equal types, 16-byte rows and pointers, fewer than 2^31 answer units, and a chunk of whole
  // lines (PassChunkUnits in gather/column_passes_launch.h).
  kColumnPasses = 5,
};

// What a gather moves: a LookupProblem of the gather family (lookup.h), one id per answer row.
struct GatherProblem {
  const void* d_table = nullptr;  // num_rows x dim elements of table_type
  DataType table_type = DataType::kFloat32;
  int64_t num_rows = 0;
  int64_t dim = 0;
  const int64_t* d_ids = nullptr;  // num_ids ids in [0, num_rows)
  int64_t num_ids = 0;
  void* d_out = nullptr;  // num_ids x dim elements of out_type
  DataType out_type = DataType::kFloat32;
};

// How a gather is launched. The defaults are the rule's kUnits plan.
struct GatherPlan {
  GatherPath path = GatherPath::kUnits;
  // kUnits and kColumnPasses: units in flight per thread: 1, 2, 4, 8 (16-byte units) or 2, 4, 8,
  // 16 (narrower) at levels 0 to 3. kRowOwners: table rows per block: 1/4, 1/2 or 1 times the
  // launcher's bytes-read estimate at levels 0, 1 and 2 or 3 (within the shared memory limit).
  // kSliceOwners: answer rows in flight per thread: 1, 2, 4 or 8.
  int unroll_level = 1;
  bool interleaved = true;       // kUnits: the grid sweeps the answer front to back; else spans
  bool streaming_stores = true;  // answer stores evict-first (st.global.cs; a policy for owners)
  bool table_evict_last = true;  // table loads carry an L2 evict_last policy
  // The grid cap. kUnits and kColumnPasses: 0, kGatherMaxWaves resident waves of the chosen
  // kernel (num_sms * its blocks per SM * 64); -k, k waves (-1: a persistent grid); > 0, blocks.
  // kRowOwners: the number of id slices (grid.y): 0 or -k, as many as fill k resident waves (0:
  // one); > 0, that many (at most num_ids and 65535). kSliceOwners: the blocks per column slice
  // (grid.y): 0 or -k, as many as fill k resident waves (0: one); > 0, that many.
  int max_blocks = 0;
};

// The production rule: the plan for `problem` on the device of `tuning` (GetGatherTuning). The
// rule and its figures are in gather_rule.cc. Reads no memory and calls no CUDA; for a problem
// that LaunchGatherPlan rejects, the plan is unspecified.
GatherPlan PlanGather(const GatherTuning& tuning, const GatherProblem& problem);

// Whether the kernel of `path` can serve `problem` on the device of `tuning`: always for kUnits;
// for the others, their preconditions (see GatherPath). False for a value that is no path.
bool GatherPathFits(const GatherTuning& tuning, GatherPath path, const GatherProblem& problem);

// Enqueues the gather of `problem` on `stream` with `plan` (LaunchLookup's contract in
// lookup.h, with errors as cudaError_t). kUnits picks the widest access (16, 8, 4 or 2
// bytes) that the row length and both pointers' alignment allow. Returns cudaErrorInvalidValue
// for a bad dtype, dim < 1, num_rows < 0, num_ids < 0, a tuning without multiprocessors, a plan
// with no valid path or unroll level, null pointers with num_ids > 0, a path that does not fit
// the problem (GatherPathFits) or a row over 2^30 units; otherwise the launches' error
// (cudaPeekAtLastError). num_ids == 0 launches nothing.
cudaError_t LaunchGatherPlan(const GatherTuning& tuning, const GatherPlan& plan,
                             const GatherProblem& problem, cudaStream_t stream);

// LaunchGatherPlan without its checks, for a caller that made them (LaunchLookup with PlanGather's
// plan, which always fits).
cudaError_t LaunchCheckedGatherPlan(const GatherTuning& tuning, const GatherPlan& plan,
                                    const GatherProblem& problem, cudaStream_t stream);

}  // namespace emb::kernels

#endif  // EMB_KERNELS_GATHER_PLAN_H_
