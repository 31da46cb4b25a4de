// The bag kernels' launch geometry and tuning (kernels/bags/bag_kernel.cuh): threads a block,
// the register bounds, id staging, rows a step and the short-bag kernel's choices, each with the
// -D knob a benchmark build may set (bench/kernels/build_bag_variant.sh): the only file of
// kernels/ that reads one. Private to kernels/.
#ifndef EMB_KERNELS_BAGS_BAG_TUNING_CUH_
#define EMB_KERNELS_BAGS_BAG_TUNING_CUH_

#include <cstddef>
#include <cstdint>

#include "kernels/data_type.h"

namespace emb::kernels::bags {

inline constexpr int kBlockThreads = 256;
// Blocks each SM must be able to hold (a bound on registers a thread), and whether PoolItem stages
// a bag's ids (see there). Measured on the H200 (docs/benchmarks.md): staging the ids took 4% to
// 26% off the pooled cases. With unchecked loads (PoolItem) a float32 bag kernel of one tile needs
// 80 registers, and bound to 4 blocks (64 registers, 8 bytes spilled) it was up to 6% faster
// still; two tiles spill 36 bytes under that bound and ran 1.5% slower, the other
// table types need 90 to 180 registers, and GatherKernel spills under any bound tighter than its
// own 128: those are not bound. Builds for benchmarks may set others (-DEMB_BAG_MIN_BLOCKS=N
// for every table type, -DEMB_GATHER_MIN_BLOCKS=N, -DEMB_BAG_STAGE_IDS=0 or 1;
// bench/kernels/build_bag_variant.sh) to measure them side by side.
#ifndef EMB_GATHER_MIN_BLOCKS
#define EMB_GATHER_MIN_BLOCKS 1
#endif
#ifndef EMB_BAG_STAGE_IDS
#define EMB_BAG_STAGE_IDS 1
#endif
template <DataType kT, int kTileVectors>
inline constexpr int kBagMinBlocks =
#ifdef EMB_BAG_MIN_BLOCKS
    EMB_BAG_MIN_BLOCKS;
#else
    kT == DataType::kFloat32&& kTileVectors == 1 ? 4 : 1;
#endif
inline constexpr int kGatherMinBlocks = EMB_GATHER_MIN_BLOCKS;
inline constexpr bool kStageIds = EMB_BAG_STAGE_IDS != 0;
// Short bags (fewer than kShortBagIds ids on average; 0: none are) of one tile run their own
// kernel: ids loaded one by one (no staging), kShortUnroll rows a step, bound to kShortMinBlocks
// blocks an SM (as the others of their type unless set). Builds for benchmarks may set others
// (-DEMB_BAG_SHORT_IDS=N, -DEMB_BAG_SHORT_UNROLL=N, -DEMB_BAG_SHORT_MIN_BLOCKS=N).
#ifndef EMB_BAG_SHORT_IDS
#define EMB_BAG_SHORT_IDS 16
#endif
#ifndef EMB_BAG_SHORT_UNROLL
#define EMB_BAG_SHORT_UNROLL 8
#endif
inline constexpr int64_t kShortBagIds = EMB_BAG_SHORT_IDS;
inline constexpr int kShortUnroll = EMB_BAG_SHORT_UNROLL;
template <DataType kT>
inline constexpr int kShortMinBlocks =
#ifdef EMB_BAG_SHORT_MIN_BLOCKS
    EMB_BAG_SHORT_MIN_BLOCKS;
#else
    kBagMinBlocks<kT, 1>;
#endif

// Rows added per step: with two vectors a lane, fewer rows keep the registers in bounds. Builds
// for benchmarks may set others (-DEMB_BAG_UNROLL_1=N, -DEMB_BAG_UNROLL_2=N) to sweep them.
#ifndef EMB_BAG_UNROLL_1
#define EMB_BAG_UNROLL_1 8
#endif
#ifndef EMB_BAG_UNROLL_2
#define EMB_BAG_UNROLL_2 4
#endif
template <int kTileVectors>
inline constexpr int kUnrollFor = kTileVectors == 1 ? EMB_BAG_UNROLL_1 : EMB_BAG_UNROLL_2;

// What the launcher chose for a launch.
struct BagGrid {
  int group;         // lanes per (bag, tile): a power of two, up to 32
  int64_t vectors;   // per row: dim / values per vector
  int64_t tiles;     // per bag
  size_t row_bytes;  // of the table
};

}  // namespace emb::kernels::bags

#endif  // EMB_KERNELS_BAGS_BAG_TUNING_CUH_
