// Private to kernels/: the launcher of the gather kernels (gather_dispatch.cu),
// in plain CUDA runtime terms so that nvcc never sees Abseil.
// embedding_lookup.cc and gather_capi.cc wrap it. Thread-safe (no state).
#ifndef EMB_KERNELS_GATHER_DISPATCH_H_
#define EMB_KERNELS_GATHER_DISPATCH_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/data_type.h"

namespace emb::kernels {

// Threads per block of the gather kernels.
inline constexpr int kGatherBlockThreads = 256;
// GatherVariant::unroll_level is in [0, kGatherUnrollLevels).
inline constexpr int kGatherUnrollLevels = 4;

// Which kernel does a gather.
enum class GatherPath : int {
  // The dispatcher's rule (see ChoosePath in gather_dispatch.cu): for long rows, kSliceOwners or
  // kRowOwners for small tables that the ids use twice or more on average, kColumnPasses for
  // tables past L2; else kUnits.
  kAuto = 0,
  // GatherUnitsKernel: threads load, convert and store 2- to 16-byte units. Any types, any dim.
  kUnits = 1,
  // (2 was a bulk-rows path through the copy engine, removed: docs/kernel_benchmark_h200.md.)
  // GatherRowOwnersKernel: each block holds a group of table rows in shared memory and writes
  // them wherever the ids ask for them. Needs sm_90, equal table and answer types, 16-byte rows
  // and pointers, and rows up to the shared memory a block can have; elsewhere kUnits.
  kRowOwners = 3,
  // GatherSliceOwnersKernel: each block holds one 128-byte column slice of the table's first rows
  // (as many as its shared memory takes) and writes that slice of every answer row. Needs equal
  // table and answer types, rows a multiple of 128 bytes and 16-byte pointers; elsewhere kUnits.
  kSliceOwners = 4,
  // GatherColumnPassesKernel: kUnits' copy in passes over column chunks, each chunk of the table
  // small enough for L2, so that a row the ids repeat is read from memory once per chunk. Needs
  // equal types, 16-byte rows and pointers, and a chunk of whole lines (PassChunkUnits in
  // gather_dispatch.cu); elsewhere kUnits. Takes kUnits' variant fields.
  kColumnPasses = 5,
};

// How a gather kernel walks the answer. The default (kAuto, with the other fields as below for
// kUnits) is the production choice, from the sweep that kernels/tools/gather_benchmark.py ran on an
// H200 (docs/kernel_benchmark_h200.md); the others stay for that sweep and are tested like the
// default.
struct GatherVariant {
  GatherPath path = GatherPath::kAuto;
  // kUnits: units in flight per thread: 1, 2, 4, 8 (16-byte units) or 2, 4, 8, 16 (narrower) at
  // levels 0 to 3. kRowOwners: table rows per block:
  // 1/4, 1/2 or 1 times the dispatcher's bytes-read estimate (within the shared memory limit).
  // kSliceOwners: answer rows in flight per thread: 1, 2, 4 or 8.
  int unroll_level = 1;
  bool interleaved = true;       // kUnits: the grid sweeps the answer front to back; else spans
  bool streaming_stores = true;  // answer stores evict-first (st.global.cs; a policy for owners)
  bool table_evict_last = true;  // table loads carry an L2 evict_last policy
};

// The default grid cap, in resident waves: with one tile per block the hardware balances the
// blocks (the sweep measured up to 6% faster than a single persistent wave, for 16 KB rows).
inline constexpr int kGatherMaxWaves = 64;

// How big a grid the launcher may use, and which variant. The device fields come from the
// device's attributes (GetGatherTuning).
struct GatherLaunchShape {
  int num_sms = 0;               // multiprocessors of the device
  int max_threads_per_sm = 0;    // resident threads per multiprocessor
  int cc_major = 0;              // compute capability major; kRowOwners needs 9 or more
  int smem_per_block_optin = 0;  // bytes of shared memory a block may opt in to
  int64_t l2_bytes = 0;          // L2 size; column passes size their chunks by it
  // The grid cap, for launch-shape experiments. kUnits: 0, kGatherMaxWaves resident waves of the
  // chosen kernel (num_sms * its blocks per SM * 64); -k, k waves (-1: a persistent grid); > 0,
  // blocks. kRowOwners:
  // the number of id slices (grid.y): 0 or -k, as many as fill k resident waves (0: one); > 0,
  // that many (at most num_ids and 65535). kSliceOwners: the blocks per column slice (grid.y): 0 or
  // -k, as many as fill k resident waves (0: one); > 0, that many.
  int max_blocks = 0;
  GatherVariant variant;
};

struct GatherTuning;  // embedding_lookup.h

// The launch shape for a device's tuning (GetGatherTuning): its facts, with the default grid cap
// and variant. Defined in embedding_lookup.cc.
GatherLaunchShape LaunchShapeOf(const GatherTuning& tuning);

// The variant that a benchmark's bits name (kernels/tools/gather_benchmark.py, emb_gather_ex):
// bits 0-1 the unroll level (0..3), bit 2 interleaved (1) or one span per block (0), bit 3 plain
// (1) or evict-first (0) answer stores, bit 4 table loads with an L2 evict_last policy (1), bits
// 5-6 the path: 0 kUnits, 1 kSliceOwners, 2 kRowOwners, 3 kAuto; bit 7 (with path 0) kColumnPasses.
// False, and
// *variant untouched, for bits that name no variant.
bool GatherVariantFromBits(int bits, GatherVariant* variant);

// Writes the fewest resident blocks per multiprocessor, over all gather kernel
// variants, on the current device, to *blocks_per_sm. Returns the occupancy
// query's error.
cudaError_t GatherBlocksPerSm(int* blocks_per_sm);

// Enqueues the gather on `stream` (see LaunchGather in embedding_lookup.h for the contract) with
// the path of shape.variant (kAuto: the dispatcher's rule). kUnits picks the widest access (16,
// 8, 4 or 2 bytes) that the row length and both pointers' alignment allow, and a grid of one block
// per tile up to shape.max_blocks. Returns cudaErrorInvalidValue for a bad dtype, dim < 1,
// num_rows < 0, num_ids < 0, a shape without multiprocessors, a bad variant or a row over 2^30
// units; otherwise the launches' error (cudaPeekAtLastError). num_ids == 0 launches nothing.
cudaError_t EnqueueGather(const GatherLaunchShape& shape, const void* d_table, DataType table_type,
                          int64_t num_rows, int64_t dim, const int64_t* d_ids, int64_t num_ids,
                          void* d_out, DataType out_type, cudaStream_t stream);

// The path that EnqueueGather takes for these arguments (never kAuto): shape.variant.path unless
// kAuto or unfit for them (then the rule, or kUnits).
GatherPath ResolveGatherPath(const GatherLaunchShape& shape, const void* d_table,
                             DataType table_type, int64_t num_rows, int64_t dim, int64_t num_ids,
                             const void* d_out, DataType out_type);

}  // namespace emb::kernels

#endif  // EMB_KERNELS_GATHER_DISPATCH_H_
