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
inline constexpr int kGatherUnrollLevels = 3;

// How a gather kernel walks the answer. The default is the production choice, the fastest of the
// sweep that kernels/tools/gather_benchmark.py ran on an H200 (docs/kernel_benchmark_h200.md:
// within 1% of the best variant per case on geometric mean, 6% at worst); the others stay for
// that sweep and are tested like the default.
struct GatherVariant {
  // Units in flight per thread: 1, 2, 4 (16-byte units) or 2, 4, 8 (narrower) at levels 0, 1, 2.
  int unroll_level = 1;
  bool interleaved = true;       // the grid sweeps the answer front to back; else a span a block
  bool streaming_stores = true;  // answer stores are evict-first (st.global.cs)
  bool table_evict_last = true;  // table loads carry an L2 evict_last policy
};

// The default grid cap, in resident waves: with one tile per block the hardware balances the
// blocks (the sweep measured up to 6% faster than a single persistent wave, for 16 KB rows).
inline constexpr int kGatherMaxWaves = 64;

// How big a grid the launcher may use, and which variant.
struct GatherLaunchShape {
  int num_sms = 0;             // multiprocessors of the device
  int max_threads_per_sm = 0;  // resident threads per multiprocessor
  // The grid cap, for launch-shape experiments: 0, kGatherMaxWaves resident waves of the chosen
  // kernel (num_sms * its blocks per SM * 64); -k, k waves (-1: a persistent grid); > 0, blocks.
  int max_blocks = 0;
  GatherVariant variant;
};

// Writes the fewest resident blocks per multiprocessor, over all gather kernel
// variants, on the current device, to *blocks_per_sm. Returns the occupancy
// query's error.
cudaError_t GatherBlocksPerSm(int* blocks_per_sm);

// Enqueues the gather on `stream` (see LaunchGather in embedding_lookup.h for the contract). Picks
// the widest access (16, 8, 4 or 2 bytes) that the row length and both pointers' alignment allow,
// and a grid of one block per tile up to shape.max_blocks. Returns cudaErrorInvalidValue for a bad
// dtype, dim < 1, num_ids < 0, a shape without multiprocessors, a bad variant or a row over 2^30
// units; otherwise the launches' error (cudaPeekAtLastError). num_ids == 0 launches nothing.
cudaError_t EnqueueGather(const GatherLaunchShape& shape, const void* d_table, DataType table_type,
                          int64_t dim, const int64_t* d_ids, int64_t num_ids, void* d_out,
                          DataType out_type, cudaStream_t stream);

}  // namespace emb::kernels

#endif  // EMB_KERNELS_GATHER_DISPATCH_H_
