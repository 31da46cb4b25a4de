// Picks and launches a GatherUnitsKernel (gather_kernel.cuh). No Abseil here (STYLE §1);
// embedding_lookup.cc turns the cudaError_t into a Status.
#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "kernels/gather_dispatch.h"
#include "kernels/gather_kernel.cuh"

namespace emb::kernels {
namespace {

using gather::BF16;
using gather::F16;
using gather::F32;
using gather::FastDivmod;
using gather::GatherArgs;
using gather::GatherUnitsKernel;
using gather::kBlockThreads;
using gather::kUnrollLevels;
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
  static_assert(kUnrollLevels == 3);
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

bool IsAligned(const void* p, int bytes) {
  return reinterpret_cast<uintptr_t>(p) % static_cast<uintptr_t>(bytes) == 0;
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
  // A resident wave: __launch_bounds__ guarantees kMinBlocksPerSm blocks fit on a full SM.
  const int64_t wave =
      int64_t{shape.num_sms} *
      std::max(1, std::min(gather::kMinBlocksPerSm<kUnroll, gather::kWiderUnitBytes<In, Out, kN>>,
                           shape.max_threads_per_sm / kBlockThreads));
  const int64_t max_blocks =
      shape.max_blocks > 0
          ? shape.max_blocks
          : wave * (shape.max_blocks < 0 ? -int64_t{shape.max_blocks} : int64_t{kGatherMaxWaves});

  GatherArgs args;
  args.units_per_row = FastDivmod::Make(static_cast<uint32_t>(row_units));
  args.flags = (shape.variant.streaming_stores ? gather::kStreamingStores : 0) |
               (shape.variant.table_evict_last ? gather::kTableEvictLast : 0);
  const auto* table = static_cast<const InVec*>(d_table);
  auto* out = static_cast<OutVec*>(d_out);

  // The runtime reports a launch's error through the thread's last error. Drop a stale
  // non-sticky one left by an earlier call (which returned it already), so that it is not blamed
  // on this launch; a sticky error can't be dropped and is reported below.
  (void)cudaGetLastError();
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
    if (const cudaError_t e = cudaPeekAtLastError(); e != cudaSuccess) {
      (void)cudaGetLastError();  // reported here, once (a sticky error stays regardless)
      return e;
    }
  }
  return cudaSuccess;
}

template <typename In, typename Out, int kN>
cudaError_t LaunchUnits(const GatherLaunchShape& shape, const void* d_table, int64_t dim,
                        const int64_t* d_ids, int64_t num_ids, void* d_out, cudaStream_t stream) {
  switch (shape.variant.unroll_level) {
    case 0:
      return LaunchUnrolled<In, Out, kN, 0>(shape, d_table, dim, d_ids, num_ids, d_out, stream);
    case 1:
      return LaunchUnrolled<In, Out, kN, 1>(shape, d_table, dim, d_ids, num_ids, d_out, stream);
    case 2:
      return LaunchUnrolled<In, Out, kN, 2>(shape, d_table, dim, d_ids, num_ids, d_out, stream);
  }
  return cudaErrorInvalidValue;
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

bool IsDataType(DataType t) {
  return t == DataType::kFloat32 || t == DataType::kFloat16 || t == DataType::kBFloat16;
}

}  // namespace

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

cudaError_t EnqueueGather(const GatherLaunchShape& shape, const void* d_table, DataType table_type,
                          int64_t dim, const int64_t* d_ids, int64_t num_ids, void* d_out,
                          DataType out_type, cudaStream_t stream) {
  if (!IsDataType(table_type) || !IsDataType(out_type) || dim < 1 || num_ids < 0 ||
      shape.num_sms < 1 || shape.variant.unroll_level < 0 ||
      shape.variant.unroll_level >= kUnrollLevels) {
    return cudaErrorInvalidValue;
  }
  if (num_ids == 0) {
    return cudaSuccess;
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
