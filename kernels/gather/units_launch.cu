// LaunchUnits and the units kernels' occupancy (units_launch.h): every instantiation of
// GatherUnitsKernel, by element types, unit width and unroll level. No Abseil here (STYLE §1).
#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "kernels/gather/launch_util.cuh"
#include "kernels/gather/units_kernel.cuh"
#include "kernels/gather/units_launch.h"

namespace emb::kernels::gather {
namespace {

// One launch handles at most this many answer units (the kernel indexes them in 32 bits and
// divides with FastDivmod, exact below 2^31); a larger batch takes several launches.
constexpr int64_t kMaxUnitsPerLaunch = int64_t{1} << 30;

template <typename In, typename Out>
constexpr int MaxElementBytes() {
  return static_cast<int>(std::max(sizeof(typename In::Bits), sizeof(typename Out::Bits)));
}

template <typename In, typename Out, int kN, int kLevel>
constexpr int UnrollFor() {
  return UnrollAt<kWiderUnitBytes<In, Out, kN>>(kLevel);
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

template <typename In, typename Out, int kN, int kLevel>
cudaError_t LaunchUnrolled(const GatherTuning& tuning, const GatherPlan& plan,
                           const GatherProblem& p, cudaStream_t stream) {
  using InVec = typename Unit<In, kN>::Type;
  using OutVec = typename Unit<Out, kN>::Type;
  constexpr int kUnroll = UnrollFor<In, Out, kN, kLevel>();
  constexpr int64_t kTile = int64_t{kBlockThreads} * kUnroll;
  const int64_t row_units = p.dim / kN;
  if (row_units >= kMaxUnitsPerLaunch) {
    return cudaErrorInvalidValue;
  }
  const int64_t rows_per_launch = kMaxUnitsPerLaunch / row_units;
  const int64_t max_blocks =
      UnitsGridCap(tuning, plan.max_blocks, kMinBlocksPerSm<kUnroll, kWiderUnitBytes<In, Out, kN>>);

  GatherArgs args;
  args.units_per_row = FastDivmod::Make(static_cast<uint32_t>(row_units));
  args.flags = CacheFlags(plan);
  const auto* table = static_cast<const InVec*>(p.d_table);
  auto* out = static_cast<OutVec*>(p.d_out);

  DropStaleError();
  for (int64_t first = 0; first < p.num_ids; first += rows_per_launch) {
    const int64_t rows = std::min(rows_per_launch, p.num_ids - first);
    const int64_t total = rows * row_units;
    const int64_t tiles = (total + kTile - 1) / kTile;
    const int64_t blocks = std::min(tiles, max_blocks);
    int64_t grid = blocks;
    args.total_units = static_cast<uint32_t>(total);
    if (plan.interleaved) {
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
        table, p.d_ids + first, args, out + first * row_units);
    if (const cudaError_t e = TakeLaunchError(); e != cudaSuccess) {
      return e;
    }
  }
  return cudaSuccess;
}

template <typename In, typename Out, int kN>
cudaError_t LaunchWidth(const GatherTuning& tuning, const GatherPlan& plan, const GatherProblem& p,
                        cudaStream_t stream) {
  return WithUnrollLevel(plan.unroll_level, [&](auto level) {
    return LaunchUnrolled<In, Out, kN, decltype(level)::value>(tuning, plan, p, stream);
  });
}

// The widest unit that divides the row and that both base pointers are aligned to (rows then
// start aligned too, as dim is a multiple of the unit).
template <typename In, typename Out>
cudaError_t LaunchTyped(const GatherTuning& tuning, const GatherPlan& plan, const GatherProblem& p,
                        cudaStream_t stream) {
  auto fits = [&](int n) {
    return p.dim % n == 0 &&
           IsAligned(p.d_table, n * static_cast<int>(sizeof(typename In::Bits))) &&
           IsAligned(p.d_out, n * static_cast<int>(sizeof(typename Out::Bits)));
  };
  if constexpr (MaxElementBytes<In, Out>() == 2) {
    if (fits(8)) {
      return LaunchWidth<In, Out, 8>(tuning, plan, p, stream);
    }
  }
  if (fits(4)) {
    return LaunchWidth<In, Out, 4>(tuning, plan, p, stream);
  }
  if (fits(2)) {
    return LaunchWidth<In, Out, 2>(tuning, plan, p, stream);
  }
  return LaunchWidth<In, Out, 1>(tuning, plan, p, stream);
}

template <typename In>
cudaError_t LaunchFrom(const GatherTuning& tuning, const GatherPlan& plan, const GatherProblem& p,
                       cudaStream_t stream) {
  switch (p.out_type) {
    case DataType::kFloat32:
      return LaunchTyped<In, F32>(tuning, plan, p, stream);
    case DataType::kFloat16:
      return LaunchTyped<In, F16>(tuning, plan, p, stream);
    case DataType::kBFloat16:
      return LaunchTyped<In, BF16>(tuning, plan, p, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace

cudaError_t LaunchUnits(const GatherTuning& tuning, const GatherPlan& plan,
                        const GatherProblem& problem, cudaStream_t stream) {
  switch (problem.table_type) {
    case DataType::kFloat32:
      return LaunchFrom<F32>(tuning, plan, problem, stream);
    case DataType::kFloat16:
      return LaunchFrom<F16>(tuning, plan, problem, stream);
    case DataType::kBFloat16:
      return LaunchFrom<BF16>(tuning, plan, problem, stream);
  }
  return cudaErrorInvalidValue;
}

int64_t UnitsGridCap(const GatherTuning& tuning, int max_blocks, int min_blocks_per_sm) {
  if (max_blocks > 0) {
    return max_blocks;
  }
  const int64_t wave =
      int64_t{tuning.num_sms} *
      std::max(1, std::min(min_blocks_per_sm, tuning.max_threads_per_sm / kBlockThreads));
  return wave * (max_blocks < 0 ? -int64_t{max_blocks} : int64_t{kGatherMaxWaves});
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

}  // namespace emb::kernels::gather
