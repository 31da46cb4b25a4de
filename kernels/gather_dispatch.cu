// Picks and launches a gather kernel: GatherUnitsKernel (gather/units_kernel.cuh),
// GatherRowOwnersKernel (gather/row_owners_kernel.cuh) or GatherSliceOwnersKernel
// (gather/slice_owners_kernel.cuh). No Abseil here (STYLE §1);
// embedding_lookup.cc turns the cudaError_t into a Status.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <mutex>
#include <type_traits>
#include <vector>

#include "kernels/gather/column_passes_kernel.cuh"
#include "kernels/gather/row_owners_kernel.cuh"
#include "kernels/gather/slice_owners_kernel.cuh"
#include "kernels/gather/units_kernel.cuh"
#include "kernels/gather_dispatch.h"

namespace emb::kernels {
namespace {

using gather::BF16;
using gather::F16;
using gather::F32;
using gather::FastDivmod;
using gather::GatherArgs;
using gather::GatherRowOwnersKernel;
using gather::GatherUnitsKernel;
using gather::kBlockThreads;
using gather::kUnrollLevels;
using gather::RowOwnersArgs;
using gather::SliceOwnersArgs;
using gather::Unit;

static_assert(kBlockThreads == kGatherBlockThreads);
static_assert(kUnrollLevels == kGatherUnrollLevels);

// One launch handles at most this many answer units (the kernel indexes them in 32 bits and
// divides with FastDivmod, exact below 2^31); a larger batch takes several launches.
constexpr int64_t kMaxUnitsPerLaunch = int64_t{1} << 30;

template <typename In, typename Out>
constexpr int MaxElementBytes() {
  return static_cast<int>(std::max(sizeof(typename In::Bits), sizeof(typename Out::Bits)));
}

template <typename In, typename Out, int kN, int kLevel>
constexpr int UnrollFor() {
  return gather::UnrollAt<gather::kWiderUnitBytes<In, Out, kN>>(kLevel);
}

template <typename In, typename Out, int kN, int kLevel>
constexpr auto KernelFor() {
  return &GatherUnitsKernel<In, Out, kN, UnrollFor<In, Out, kN, kLevel>()>;
}

// Calls f(In{}, Out{}, integral_constant<kN>{}, integral_constant<kLevel>{}) for every unit width
// kN that fits 16 bytes and every unroll level: all the kernels there are.
template <typename In, typename Out, int kN, typename F>
void ForEachLevel(F&& f) {
  f(In{}, Out{}, std::integral_constant<int, kN>{}, std::integral_constant<int, 0>{});
  f(In{}, Out{}, std::integral_constant<int, kN>{}, std::integral_constant<int, 1>{});
  f(In{}, Out{}, std::integral_constant<int, kN>{}, std::integral_constant<int, 2>{});
  f(In{}, Out{}, std::integral_constant<int, kN>{}, std::integral_constant<int, 3>{});
  static_assert(kUnrollLevels == 4);
}

template <typename In, typename Out, typename F>
void ForEachWidth(F&& f) {
  ForEachLevel<In, Out, 1>(f);
  ForEachLevel<In, Out, 2>(f);
  ForEachLevel<In, Out, 4>(f);
  if constexpr (MaxElementBytes<In, Out>() == 2) {
    ForEachLevel<In, Out, 8>(f);
  }
}

template <typename In, typename F>
void ForEachOut(F&& f) {
  ForEachWidth<In, F32>(f);
  ForEachWidth<In, F16>(f);
  ForEachWidth<In, BF16>(f);
}

template <typename F>
void ForEachKernel(F&& f) {
  ForEachOut<F32>(f);
  ForEachOut<F16>(f);
  ForEachOut<BF16>(f);
}

// GatherArgs::flags / RowOwnersArgs::flags for a variant.
uint32_t CacheFlags(const GatherVariant& v) {
  return (v.streaming_stores ? gather::kStreamingStores : 0) |
         (v.table_evict_last ? gather::kTableEvictLast : 0);
}

// The runtime reports a launch's error through the thread's last error. Before a launch, drop a
// stale non-sticky one left by an earlier call (which returned it already), so that it is not
// blamed on this launch; a sticky error can't be dropped and is reported after the launch.
void DropStaleError() { (void)cudaGetLastError(); }

// After a launch: its error, reported here once (a sticky error stays regardless).
cudaError_t TakeLaunchError() {
  const cudaError_t e = cudaPeekAtLastError();
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
  }
  return e;
}

bool IsAligned(const void* p, int bytes) {
  return reinterpret_cast<uintptr_t>(p) % static_cast<uintptr_t>(bytes) == 0;
}

// Calls f(std::integral_constant<int, level>{}) for a variant's unroll level (0 to 3), so that a
// launcher can take the level as a template argument; cudaErrorInvalidValue for another level.
template <typename F>
cudaError_t WithUnrollLevel(int level, F&& f) {
  static_assert(kUnrollLevels == 4);
  switch (level) {
    case 0:
      return f(std::integral_constant<int, 0>{});
    case 1:
      return f(std::integral_constant<int, 1>{});
    case 2:
      return f(std::integral_constant<int, 2>{});
    case 3:
      return f(std::integral_constant<int, 3>{});
  }
  return cudaErrorInvalidValue;
}

// The grid cap of a units-style launch (GatherLaunchShape::max_blocks): blocks as asked, or
// resident waves of a kernel that __launch_bounds__ fits `min_blocks_per_sm` times on a full
// multiprocessor (-k: k waves; 0: kGatherMaxWaves).
int64_t UnitsGridCap(const GatherLaunchShape& shape, int min_blocks_per_sm) {
  if (shape.max_blocks > 0) {
    return shape.max_blocks;
  }
  const int64_t wave =
      int64_t{shape.num_sms} *
      std::max(1, std::min(min_blocks_per_sm, shape.max_threads_per_sm / kBlockThreads));
  return wave * (shape.max_blocks < 0 ? -int64_t{shape.max_blocks} : int64_t{kGatherMaxWaves});
}

template <typename In, typename Out, int kN, int kLevel>
cudaError_t LaunchUnrolled(const GatherLaunchShape& shape, const void* d_table, int64_t dim,
                           const int64_t* d_ids, int64_t num_ids, void* d_out,
                           cudaStream_t stream) {
  using InVec = typename Unit<In, kN>::Type;
  using OutVec = typename Unit<Out, kN>::Type;
  constexpr int kUnroll = UnrollFor<In, Out, kN, kLevel>();
  constexpr int64_t kTile = int64_t{kBlockThreads} * kUnroll;
  const int64_t row_units = dim / kN;
  if (row_units >= kMaxUnitsPerLaunch) {
    return cudaErrorInvalidValue;
  }
  const int64_t rows_per_launch = kMaxUnitsPerLaunch / row_units;
  const int64_t max_blocks =
      UnitsGridCap(shape, gather::kMinBlocksPerSm<kUnroll, gather::kWiderUnitBytes<In, Out, kN>>);

  GatherArgs args;
  args.units_per_row = FastDivmod::Make(static_cast<uint32_t>(row_units));
  args.flags = CacheFlags(shape.variant);
  const auto* table = static_cast<const InVec*>(d_table);
  auto* out = static_cast<OutVec*>(d_out);

  DropStaleError();
  for (int64_t first = 0; first < num_ids; first += rows_per_launch) {
    const int64_t rows = std::min(rows_per_launch, num_ids - first);
    const int64_t total = rows * row_units;
    const int64_t tiles = (total + kTile - 1) / kTile;
    const int64_t blocks = std::min(tiles, max_blocks);
    int64_t grid = blocks;
    args.total_units = static_cast<uint32_t>(total);
    if (shape.variant.interleaved) {
      args.block_stride = static_cast<uint32_t>(kTile);
      args.tile_stride = static_cast<uint32_t>(blocks * kTile);
      args.share_units = 0;
    } else {
      // Even spans of whole tiles; the grid shrinks if rounding left blocks idle.
      const int64_t share = (tiles + blocks - 1) / blocks * kTile;
      grid = (total + share - 1) / share;
      args.block_stride = static_cast<uint32_t>(share);
      args.tile_stride = static_cast<uint32_t>(kTile);
      args.share_units = static_cast<uint32_t>(share);
    }
    KernelFor<In, Out, kN, kLevel>()<<<static_cast<unsigned int>(grid), kBlockThreads, 0, stream>>>(
        table, d_ids + first, args, out + first * row_units);
    if (const cudaError_t e = TakeLaunchError(); e != cudaSuccess) {
      return e;
    }
  }
  return cudaSuccess;
}

template <typename In, typename Out, int kN>
cudaError_t LaunchUnits(const GatherLaunchShape& shape, const void* d_table, int64_t dim,
                        const int64_t* d_ids, int64_t num_ids, void* d_out, cudaStream_t stream) {
  return WithUnrollLevel(shape.variant.unroll_level, [&](auto level) {
    return LaunchUnrolled<In, Out, kN, decltype(level)::value>(shape, d_table, dim, d_ids, num_ids,
                                                               d_out, stream);
  });
}

// The widest unit that divides the row and that both base pointers are aligned to (rows then
// start aligned too, as dim is a multiple of the unit).
template <typename In, typename Out>
cudaError_t LaunchTyped(const GatherLaunchShape& shape, const void* d_table, int64_t dim,
                        const int64_t* d_ids, int64_t num_ids, void* d_out, cudaStream_t stream) {
  auto fits = [&](int n) {
    return dim % n == 0 && IsAligned(d_table, n * static_cast<int>(sizeof(typename In::Bits))) &&
           IsAligned(d_out, n * static_cast<int>(sizeof(typename Out::Bits)));
  };
  if constexpr (MaxElementBytes<In, Out>() == 2) {
    if (fits(8)) {
      return LaunchUnits<In, Out, 8>(shape, d_table, dim, d_ids, num_ids, d_out, stream);
    }
  }
  if (fits(4)) {
    return LaunchUnits<In, Out, 4>(shape, d_table, dim, d_ids, num_ids, d_out, stream);
  }
  if (fits(2)) {
    return LaunchUnits<In, Out, 2>(shape, d_table, dim, d_ids, num_ids, d_out, stream);
  }
  return LaunchUnits<In, Out, 1>(shape, d_table, dim, d_ids, num_ids, d_out, stream);
}

template <typename In>
cudaError_t LaunchFrom(const GatherLaunchShape& shape, const void* d_table, int64_t dim,
                       const int64_t* d_ids, int64_t num_ids, void* d_out, DataType out_type,
                       cudaStream_t stream) {
  switch (out_type) {
    case DataType::kFloat32:
      return LaunchTyped<In, F32>(shape, d_table, dim, d_ids, num_ids, d_out, stream);
    case DataType::kFloat16:
      return LaunchTyped<In, F16>(shape, d_table, dim, d_ids, num_ids, d_out, stream);
    case DataType::kBFloat16:
      return LaunchTyped<In, BF16>(shape, d_table, dim, d_ids, num_ids, d_out, stream);
  }
  return cudaErrorInvalidValue;
}

// ---- The row-owners path (copy engine; sm_90 and later) ----

// Shared memory a row-owners block holds rows in, at most (so that a block always fits).
constexpr int64_t kOwnerMaxGroupBytes = 200 << 10;
// Prepares `kernel` for launches with `dyn_bytes` of dynamic shared memory on the current device
// (raising its limit to the device's opt-in maximum, once) and writes its
// resident blocks per multiprocessor: at least 1, else cudaErrorInvalidConfiguration. Cached per
// device, kernel and size (a process sees few).
cudaError_t PrepareSmemKernel(const void* kernel, int threads, int64_t dyn_bytes, int optin_bytes,
                              int* blocks_per_sm) {
  struct Entry {
    int device;
    const void* kernel;
    int64_t dyn_bytes;
    int blocks;
  };
  static std::mutex mu;
  static auto* cache = new std::vector<Entry>;  // never destroyed: used at any exit order
  int device = 0;
  if (const cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) {
    return e;
  }
  std::lock_guard<std::mutex> lock(mu);
  bool raised = false;  // any entry of this kernel on this device means its limit was raised
  for (const Entry& entry : *cache) {
    if (entry.device == device && entry.kernel == kernel) {
      if (entry.dyn_bytes == dyn_bytes) {
        *blocks_per_sm = entry.blocks;
        return cudaSuccess;
      }
      raised = true;
    }
  }
  // Always to the maximum (the opt-in size less the kernel's static shared memory), so that a
  // concurrent launch of a larger size never sees a lower limit. A failed call is reported here,
  // not left as the thread's last error for the next launch to pick up.
  if (!raised) {
    cudaFuncAttributes attributes{};
    cudaError_t e = cudaFuncGetAttributes(&attributes, kernel);
    if (e == cudaSuccess) {
      e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               optin_bytes - static_cast<int>(attributes.sharedSizeBytes));
    }
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      return e;
    }
  }
  int blocks = 0;
  if (const cudaError_t e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(
          &blocks, kernel, threads, static_cast<size_t>(dyn_bytes));
      e != cudaSuccess) {
    (void)cudaGetLastError();
    return e;
  }
  if (blocks < 1) {
    return cudaErrorInvalidConfiguration;  // not cached: the next call says the same
  }
  if (cache->size() < 256) {
    cache->push_back(Entry{device, kernel, dyn_bytes, blocks});
  }
  *blocks_per_sm = blocks;
  return cudaSuccess;
}

// Table rows per row-owners block. Each block reads its rows once per id slice and scans its
// slice of the ids, so over a grid of G groups x S slices that fills the device (G * S ~ the
// resident blocks T, taken as 2 per multiprocessor) the bytes read are S * table + G * ids * 8 =
// table * T / G + G * ids * 8, least at G = sqrt(table * T / (ids * 8)): rows per block R =
// sqrt(num_rows * ids * 8 / (T * row_bytes)). unroll_level 0, 1, 2 (and 3) scales that by 1/4,
// 1/2 or 1 (the first H200 sweep measured 1/2 fastest on average for 16 KB rows; run 22, on the
// seed cases with ids >= 2 x rows, measured 1/4 fastest on each, which the rule now uses); the
// result is kept within kOwnerMaxGroupBytes and the block's opt-in shared memory.
int64_t OwnerRowsPerGroup(const GatherLaunchShape& shape, int64_t num_rows, int64_t row_bytes,
                          int64_t num_ids) {
  const double resident = 2.0 * shape.num_sms;
  const double best = std::sqrt(static_cast<double>(num_rows) * static_cast<double>(num_ids) * 8.0 /
                                (resident * static_cast<double>(row_bytes)));
  const double scaled = best * (shape.variant.unroll_level == 0   ? 0.25
                                : shape.variant.unroll_level == 1 ? 0.5
                                                                  : 1.0);
  const int64_t cap_bytes =
      std::min<int64_t>(kOwnerMaxGroupBytes, int64_t{shape.smem_per_block_optin} - 1024);
  const int64_t most = std::max<int64_t>(1, cap_bytes / row_bytes);
  return std::clamp<int64_t>(std::llround(scaled), 1, std::min(most, num_rows));
}

cudaError_t LaunchRowOwners(const GatherLaunchShape& shape, const void* d_table, int64_t num_rows,
                            int64_t row_bytes, const int64_t* d_ids, int64_t num_ids, void* d_out,
                            cudaStream_t stream) {
  const int64_t rows_per_group = OwnerRowsPerGroup(shape, num_rows, row_bytes, num_ids);
  const int64_t groups = (num_rows + rows_per_group - 1) / rows_per_group;
  const int64_t dyn_bytes = rows_per_group * row_bytes;
  const void* kernel = reinterpret_cast<const void*>(&GatherRowOwnersKernel);
  int blocks_per_sm = 0;
  if (const cudaError_t e = PrepareSmemKernel(kernel, gather::kOwnerThreads, dyn_bytes,
                                              shape.smem_per_block_optin, &blocks_per_sm);
      e != cudaSuccess) {
    return e;
  }
  // Id slices: enough that the grid fills `waves` resident waves, each slice at least 256 ids;
  // or as asked.
  int64_t slices = 0;
  if (shape.max_blocks > 0) {
    slices = shape.max_blocks;
  } else {
    const int64_t waves = shape.max_blocks < 0 ? -int64_t{shape.max_blocks} : 1;
    const int64_t resident = int64_t{shape.num_sms} * blocks_per_sm * waves;
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
  args.flags = CacheFlags(shape.variant);
  DropStaleError();
  GatherRowOwnersKernel<<<dim3(static_cast<unsigned int>(groups),
                               static_cast<unsigned int>(slices)),
                          gather::kOwnerThreads, static_cast<size_t>(dyn_bytes), stream>>>(
      static_cast<const uint8_t*>(d_table), d_ids, args, static_cast<uint8_t*>(d_out));
  return TakeLaunchError();
}

// Whether the row-owners path can serve these arguments: the copy engine (sm_90), raw bytes
// (equal types), rows and both base pointers on 16 bytes, and a row that fits a block's shared
// memory.
bool OwnersFit(const GatherLaunchShape& shape, const void* d_table, DataType table_type,
               int64_t num_rows, int64_t dim, const void* d_out, DataType out_type) {
  const int64_t row_bytes = dim * static_cast<int64_t>(ElementSize(table_type));
  return shape.cc_major >= 9 && table_type == out_type && row_bytes % 16 == 0 &&
         IsAligned(d_table, 16) && IsAligned(d_out, 16) && num_rows >= 1 &&
         row_bytes <=
             std::min<int64_t>(kOwnerMaxGroupBytes, int64_t{shape.smem_per_block_optin} - 1024);
}

// ---- Column passes ----

// The rule's column-passes launch: two units in flight per thread, evict-first stores,
// evict_last table loads (c1icL, the H200 sweep's best or within 1% of it on every case the rule
// gives this path: docs/benchmarks.md §1.1).
// The narrowest chunk the rule takes column passes with: at vocab 65536 x 16 KB rows the chunk
// is 256 bytes and the passes tied the plain copy; at 131072 (128 bytes), 12% slower.
constexpr int64_t kRulePassMinChunkBytes = 512;

constexpr GatherVariant kRulePasses{GatherPath::kColumnPasses, /*unroll_level=*/1,
                                    /*interleaved=*/true, /*streaming_stores=*/true,
                                    /*table_evict_last=*/true};

// The 16-byte units of a row that one column pass copies: the largest divisor of the row's units
// whose chunk of every table row takes at most half of L2, and at least 128 bytes (whole lines);
// 0 when there is none, or when one pass would take the whole row.
int64_t PassChunkUnits(const GatherLaunchShape& shape, int64_t num_rows, int64_t row_units) {
  const int64_t most = shape.l2_bytes / 2 / (std::max<int64_t>(num_rows, 1) * 16);
  for (int64_t chunk = std::min(most, row_units - 1); chunk >= 8; --chunk) {
    if (row_units % chunk == 0) {
      return chunk;
    }
  }
  return 0;
}

// Whether column passes can serve these arguments: raw bytes (equal types), rows and both base
// pointers on 16 bytes, fewer than 2^31 answer units, and a chunk (PassChunkUnits).
bool ColumnPassesFit(const GatherLaunchShape& shape, const void* d_table, DataType table_type,
                     int64_t num_rows, int64_t dim, int64_t num_ids, const void* d_out,
                     DataType out_type) {
  const int64_t row_bytes = dim * static_cast<int64_t>(ElementSize(table_type));
  return table_type == out_type && row_bytes % 16 == 0 && IsAligned(d_table, 16) &&
         IsAligned(d_out, 16) && num_ids * (row_bytes / 16) < (int64_t{1} << 31) &&
         PassChunkUnits(shape, num_rows, row_bytes / 16) > 0;
}

template <int kUnroll>
cudaError_t LaunchPassesUnrolled(const GatherLaunchShape& shape, const void* d_table,
                                 int64_t num_rows, int64_t row_units, const int64_t* d_ids,
                                 int64_t num_ids, void* d_out, cudaStream_t stream) {
  constexpr int64_t kTile = int64_t{kBlockThreads} * kUnroll;
  const int64_t chunk = PassChunkUnits(shape, num_rows, row_units);
  gather::ColumnPassesArgs args;
  args.pass_units = FastDivmod::Make(static_cast<uint32_t>(num_ids * chunk));
  args.chunk_units = FastDivmod::Make(static_cast<uint32_t>(chunk));
  args.row_units = static_cast<uint32_t>(row_units);
  args.total_units = static_cast<uint32_t>(num_ids * row_units);
  args.flags = CacheFlags(shape.variant);
  const int64_t max_blocks = UnitsGridCap(shape, gather::kMinBlocksPerSm<kUnroll, 16>);
  const int64_t tiles = (int64_t{args.total_units} + kTile - 1) / kTile;
  DropStaleError();
  gather::GatherColumnPassesKernel<kUnroll>
      <<<static_cast<unsigned int>(std::min(tiles, max_blocks)), kBlockThreads, 0, stream>>>(
          static_cast<const uint4*>(d_table), d_ids, args, static_cast<uint4*>(d_out));
  return TakeLaunchError();
}

cudaError_t LaunchColumnPasses(const GatherLaunchShape& shape, const void* d_table,
                               int64_t num_rows, int64_t row_bytes, const int64_t* d_ids,
                               int64_t num_ids, void* d_out, cudaStream_t stream) {
  const int64_t row_units = row_bytes / 16;
  return WithUnrollLevel(shape.variant.unroll_level, [&](auto level) {
    return LaunchPassesUnrolled<1 << decltype(level)::value>(shape, d_table, num_rows, row_units,
                                                             d_ids, num_ids, d_out, stream);
  });
}

// ---- The slice-owners path ----

// Shared memory a slice-owners block leaves free of held rows (the opt-in limit less this).
constexpr int64_t kSliceSmemReserve = 1024;

// The rule's slice-owners launch: four answer rows in flight per thread, evict-first stores,
// evict_last table loads (the H200 sweep's best at vocab 1024 and 2048, docs/benchmarks.md §1.1).
constexpr GatherVariant kRuleSlices{GatherPath::kSliceOwners, /*unroll_level=*/2,
                                    /*interleaved=*/true, /*streaming_stores=*/true,
                                    /*table_evict_last=*/true};

// Table rows whose slices a slice-owners block holds: all, or as many as its shared memory takes.
int64_t SliceHeldRows(const GatherLaunchShape& shape, int64_t num_rows) {
  const int64_t capacity =
      (int64_t{shape.smem_per_block_optin} - kSliceSmemReserve) / gather::kSliceBytes;
  return std::clamp<int64_t>(capacity, 0, num_rows);
}

template <int kRows>
cudaError_t LaunchSlicesUnrolled(const GatherLaunchShape& shape, const void* d_table,
                                 int64_t num_rows, int64_t row_bytes, const int64_t* d_ids,
                                 int64_t num_ids, void* d_out, cudaStream_t stream) {
  SliceOwnersArgs args;
  args.num_ids = num_ids;
  args.row_bytes = row_bytes;
  args.held_rows = SliceHeldRows(shape, num_rows);
  args.flags = CacheFlags(shape.variant);
  const int64_t dyn_bytes = args.held_rows * gather::kSliceBytes;
  const void* kernel = reinterpret_cast<const void*>(&gather::GatherSliceOwnersKernel<kRows>);
  int blocks_per_sm = 0;
  if (const cudaError_t e = PrepareSmemKernel(kernel, gather::kSliceThreads, dyn_bytes,
                                              shape.smem_per_block_optin, &blocks_per_sm);
      e != cudaSuccess) {
    return e;
  }
  // Blocks per slice: as asked, or as many as fill the resident waves asked for (at least one),
  // and never more than there are steps of answer rows.
  const int64_t slices = row_bytes / gather::kSliceBytes;
  int64_t per_slice = 0;
  if (shape.max_blocks > 0) {
    per_slice = shape.max_blocks;
  } else {
    const int64_t waves = shape.max_blocks < 0 ? -int64_t{shape.max_blocks} : 1;
    per_slice = int64_t{shape.num_sms} * blocks_per_sm * waves / slices;
  }
  const int64_t steps = (num_ids + gather::kSliceRowsPerStep - 1) / gather::kSliceRowsPerStep;
  per_slice = std::clamp<int64_t>(per_slice, 1, std::min<int64_t>(steps, 65535));
  if (slices > int64_t{0x7fffffff}) {
    return cudaErrorInvalidValue;
  }
  DropStaleError();
  gather::GatherSliceOwnersKernel<kRows>
      <<<dim3(static_cast<unsigned int>(slices), static_cast<unsigned int>(per_slice)),
         gather::kSliceThreads, static_cast<size_t>(dyn_bytes), stream>>>(
          static_cast<const uint8_t*>(d_table), d_ids, args, static_cast<uint8_t*>(d_out));
  return TakeLaunchError();
}

cudaError_t LaunchSliceOwners(const GatherLaunchShape& shape, const void* d_table, int64_t num_rows,
                              int64_t row_bytes, const int64_t* d_ids, int64_t num_ids, void* d_out,
                              cudaStream_t stream) {
  return WithUnrollLevel(shape.variant.unroll_level, [&](auto level) {
    return LaunchSlicesUnrolled<1 << decltype(level)::value>(shape, d_table, num_rows, row_bytes,
                                                             d_ids, num_ids, d_out, stream);
  });
}

// Whether the slice-owners path can serve these arguments: cp.async (sm_80), raw bytes (equal
// types), rows a multiple of 128 bytes, both base pointers on 16 bytes, and room for at least
// one held row.
bool SlicesFit(const GatherLaunchShape& shape, const void* d_table, DataType table_type,
               int64_t num_rows, int64_t dim, const void* d_out, DataType out_type) {
  const int64_t row_bytes = dim * static_cast<int64_t>(ElementSize(table_type));
  return shape.cc_major >= 8 && table_type == out_type && row_bytes % gather::kSliceBytes == 0 &&
         IsAligned(d_table, 16) && IsAligned(d_out, 16) && num_rows >= 1 &&
         SliceHeldRows(shape, num_rows) >= 1;
}

// The production rule (kAuto), from the H200 sweeps in docs/kernel_benchmark_h200.md and
// docs/benchmarks.md §1.1 (16384 ids). For rows of 16 to 32 KB (the lengths measured):
// - kSliceOwners when the ids use each row twice or more on average and a block holds at least
//   7/8 of the table's rows: at vocab 1024 and 2048 of 16 KB rows (all and 88% held) it measured
//   4% and 7% faster than the best row-owners variant; at vocab 4096 (44% held), 11% slower;
// - else kColumnPasses when the table is larger than L2, the ids are at least half the rows and
//   a pass's chunk is at least kRulePassMinChunkBytes: at vocab 4096, 8192, 16384 and 32768 of 16
//   KB rows it measured 4%, 7%, 9% and 3% faster than the path before it (row owners, then
//   kUnits); at vocab 2048 (a table that fits L2) 13% slower than slice owners;
// - else kRowOwners when the ids use each row twice or more: reading each table row once per id
//   slice instead of once per use measured 3%, 13%, 8% and 1% faster than kUnits at ids = 2, 4, 8
//   and 16 x rows; at ids = rows it was 21% slower, and for 1.2 to 4 KB rows 11% to 1.9x slower
//   at every table size (each block scans all its slice's ids, which costs more than it saves
//   when rows are short).
// Everything else takes kUnits: every conversion, rows that are not a multiple of 16 bytes,
// misaligned pointers, shorter rows (slice owners on 3 KB rows measured 9% to 26% slower than
// kUnits, column passes from 3% faster to 11% slower), and devices before sm_80 (sm_90 for row
// owners). (A bulk-rows path through the copy engine measured 2% to 15% slower than kUnits on
// every shape it served and was removed: docs/kernel_benchmark_h200.md.)
GatherPath ChoosePath(const GatherLaunchShape& shape, const void* d_table, DataType table_type,
                      int64_t num_rows, int64_t dim, int64_t num_ids, const void* d_out,
                      DataType out_type) {
  const int64_t row_bytes = dim * static_cast<int64_t>(ElementSize(table_type));
  const bool long_rows = row_bytes >= (int64_t{16} << 10) && row_bytes <= (int64_t{32} << 10);
  if (long_rows && num_ids >= 2 * num_rows &&
      SlicesFit(shape, d_table, table_type, num_rows, dim, d_out, out_type) &&
      8 * SliceHeldRows(shape, num_rows) >= 7 * num_rows) {
    return GatherPath::kSliceOwners;
  }
  if (long_rows && 2 * num_ids >= num_rows && num_rows * row_bytes > shape.l2_bytes &&
      ColumnPassesFit(shape, d_table, table_type, num_rows, dim, num_ids, d_out, out_type) &&
      PassChunkUnits(shape, num_rows, row_bytes / 16) * 16 >= kRulePassMinChunkBytes) {
    return GatherPath::kColumnPasses;
  }
  if (row_bytes >= (int64_t{16} << 10) && num_ids >= 2 * num_rows &&
      OwnersFit(shape, d_table, table_type, num_rows, dim, d_out, out_type)) {
    return GatherPath::kRowOwners;
  }
  return GatherPath::kUnits;
}

}  // namespace

bool GatherVariantFromBits(int bits, GatherVariant* variant) {
  constexpr GatherPath kPaths[] = {GatherPath::kUnits, GatherPath::kSliceOwners,
                                   GatherPath::kRowOwners, GatherPath::kAuto};
  const int path = (bits >> 5) & 3;
  const bool passes = (bits & 128) != 0;
  if (bits < 0 || bits >= 256 || (bits & 3) >= kUnrollLevels || (passes && path != 0)) {
    return false;
  }
  variant->path = passes ? GatherPath::kColumnPasses : kPaths[path];
  variant->unroll_level = bits & 3;
  variant->interleaved = (bits & 4) != 0;
  variant->streaming_stores = (bits & 8) == 0;
  variant->table_evict_last = (bits & 16) != 0;
  return true;
}

cudaError_t GatherBlocksPerSm(int* blocks_per_sm) {
  int fewest = 1 << 30;
  cudaError_t error = cudaSuccess;
  ForEachKernel([&](auto in, auto out, auto n, auto level) {
    using In = decltype(in);
    using Out = decltype(out);
    int blocks = 0;
    const cudaError_t e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(
        &blocks, KernelFor<In, Out, decltype(n)::value, decltype(level)::value>(), kBlockThreads,
        0);
    if (e != cudaSuccess && error == cudaSuccess) {
      error = e;
    }
    fewest = std::min(fewest, blocks);
  });
  if (error != cudaSuccess) {
    return error;
  }
  *blocks_per_sm = fewest;
  return cudaSuccess;
}

GatherPath ResolveGatherPath(const GatherLaunchShape& shape, const void* d_table,
                             DataType table_type, int64_t num_rows, int64_t dim, int64_t num_ids,
                             const void* d_out, DataType out_type) {
  switch (shape.variant.path) {
    case GatherPath::kAuto:
      return ChoosePath(shape, d_table, table_type, num_rows, dim, num_ids, d_out, out_type);
    case GatherPath::kRowOwners:
      return OwnersFit(shape, d_table, table_type, num_rows, dim, d_out, out_type)
                 ? GatherPath::kRowOwners
                 : GatherPath::kUnits;
    case GatherPath::kSliceOwners:
      return SlicesFit(shape, d_table, table_type, num_rows, dim, d_out, out_type)
                 ? GatherPath::kSliceOwners
                 : GatherPath::kUnits;
    case GatherPath::kColumnPasses:
      return ColumnPassesFit(shape, d_table, table_type, num_rows, dim, num_ids, d_out, out_type)
                 ? GatherPath::kColumnPasses
                 : GatherPath::kUnits;
    case GatherPath::kUnits:
      break;
  }
  return GatherPath::kUnits;
}

cudaError_t EnqueueGather(const GatherLaunchShape& shape, const void* d_table, DataType table_type,
                          int64_t num_rows, int64_t dim, const int64_t* d_ids, int64_t num_ids,
                          void* d_out, DataType out_type, cudaStream_t stream) {
  const GatherPath asked = shape.variant.path;
  if (!IsDataType(table_type) || !IsDataType(out_type) || dim < 1 || num_rows < 0 || num_ids < 0 ||
      shape.num_sms < 1 || shape.variant.unroll_level < 0 ||
      shape.variant.unroll_level >= kUnrollLevels ||
      !(asked == GatherPath::kAuto || asked == GatherPath::kUnits ||
        asked == GatherPath::kRowOwners || asked == GatherPath::kSliceOwners ||
        asked == GatherPath::kColumnPasses)) {
    return cudaErrorInvalidValue;
  }
  if (num_ids == 0) {
    return cudaSuccess;
  }
  const int64_t row_bytes = dim * static_cast<int64_t>(ElementSize(table_type));
  switch (ResolveGatherPath(shape, d_table, table_type, num_rows, dim, num_ids, d_out, out_type)) {
    case GatherPath::kRowOwners:
      if (asked == GatherPath::kAuto) {
        // The rule's row-owners launch: groups of a quarter of the bytes-read optimum (unroll
        // level 0), which the H200 sweep of run 22 measured fastest for every table it serves
        // (1% to 6% faster than a half: docs/benchmarks.md).
        GatherLaunchShape owners = shape;
        owners.variant.unroll_level = 0;
        return LaunchRowOwners(owners, d_table, num_rows, row_bytes, d_ids, num_ids, d_out, stream);
      }
      return LaunchRowOwners(shape, d_table, num_rows, row_bytes, d_ids, num_ids, d_out, stream);
    case GatherPath::kSliceOwners:
      if (asked == GatherPath::kAuto) {
        GatherLaunchShape slices = shape;
        slices.variant = kRuleSlices;
        return LaunchSliceOwners(slices, d_table, num_rows, row_bytes, d_ids, num_ids, d_out,
                                 stream);
      }
      return LaunchSliceOwners(shape, d_table, num_rows, row_bytes, d_ids, num_ids, d_out, stream);
    case GatherPath::kColumnPasses:
      if (asked == GatherPath::kAuto) {
        GatherLaunchShape passes = shape;
        passes.variant = kRulePasses;
        return LaunchColumnPasses(passes, d_table, num_rows, row_bytes, d_ids, num_ids, d_out,
                                  stream);
      }
      return LaunchColumnPasses(shape, d_table, num_rows, row_bytes, d_ids, num_ids, d_out, stream);
    case GatherPath::kAuto:
    case GatherPath::kUnits:
      break;
  }
  switch (table_type) {
    case DataType::kFloat32:
      return LaunchFrom<F32>(shape, d_table, dim, d_ids, num_ids, d_out, out_type, stream);
    case DataType::kFloat16:
      return LaunchFrom<F16>(shape, d_table, dim, d_ids, num_ids, d_out, out_type, stream);
    case DataType::kBFloat16:
      return LaunchFrom<BF16>(shape, d_table, dim, d_ids, num_ids, d_out, out_type, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace emb::kernels
