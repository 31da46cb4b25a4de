#include <algorithm>
#include <cstdint>

#include "kernels/bags/bag_kernel.cuh"
#include "kernels/bags/bag_launch.h"
#include "kernels/bags/quantized_units_kernel.cuh"

namespace emb::kernels::bags {
namespace {

// Whether `p` is a plain gather: bags of one id, unweighted and unscaled (GatherKernel).
bool IsGather(const LookupProblem& p) {
  return p.offsets == nullptr && p.weights == nullptr && p.scales == nullptr;
}

template <DataType kT, int kVecBytes, int kTileVectors>
cudaError_t Launch(const LookupProblem& p, const BagGrid& g, cudaStream_t stream) {
  constexpr int kRows = kUnrollFor<kTileVectors>;
  if (IsGather(p)) {
    const int64_t threads = (p.num_bags + kRows - 1) / kRows * g.tiles * g.group;
    const auto blocks = static_cast<unsigned>((threads + kBlockThreads - 1) / kBlockThreads);
    GatherKernel<kT, kVecBytes, kTileVectors, kRows><<<blocks, kBlockThreads, 0, stream>>>(p, g);
    return cudaPeekAtLastError();
  }
  const int64_t threads = p.num_bags * g.tiles * g.group;
  const auto blocks = static_cast<unsigned>((threads + kBlockThreads - 1) / kBlockThreads);
  if constexpr (kTileVectors == 1) {
    if (p.num_ids > 0 && p.num_ids < kShortBagIds * p.num_bags) {
      BagKernel<kT, kVecBytes, 1, kShortUnroll, false, kShortMinBlocks<kT>>
          <<<blocks, kBlockThreads, 0, stream>>>(p, g);
      return cudaPeekAtLastError();
    }
  }
  BagKernel<kT, kVecBytes, kTileVectors, kRows, kStageIds, kBagMinBlocks<kT, kTileVectors>>
      <<<blocks, kBlockThreads, 0, stream>>>(p, g);
  return cudaPeekAtLastError();
}

template <DataType kT, int kVecBytes>
cudaError_t WithTile(const LookupProblem& p, BagGrid g, cudaStream_t stream) {
  // Up to a warp of lanes, each one vector; past a warp's worth, two vectors a lane, and past two
  // warps' worth, tiles of 64 vectors.
  if (g.vectors <= 32) {
    g.group = 1;
    while (g.group < g.vectors) {
      g.group *= 2;
    }
    g.tiles = 1;
    return Launch<kT, kVecBytes, 1>(p, g, stream);
  }
  g.group = 32;
  g.tiles = (g.vectors + 63) / 64;
  return Launch<kT, kVecBytes, 2>(p, g, stream);
}

template <DataType kT>
cudaError_t WithVector(const LookupProblem& p, cudaStream_t stream) {
  if constexpr (IsQuantized(kT)) {
    if (IsGather(p) && QuantizedUnitsFit(p)) {
      return LaunchQuantizedUnits<kT>(p, stream);
    }
  }
  const int b = VectorBytes(
      kT, p.dim,
      reinterpret_cast<uintptr_t>(p.table) | reinterpret_cast<uintptr_t>(p.cached.cache));
  BagGrid g{};
  g.row_bytes = RowBytes(kT, p.dim);
  const auto vectors = [&](int values) { return p.dim / values; };
  switch (b) {
    case 16:
      if constexpr (kT != DataType::kInt4Rowwise) {
        g.vectors = vectors(kValuesPerVector<kT, 16>);
        return WithTile<kT, 16>(p, g, stream);
      }
      break;
    case 8:
      g.vectors = vectors(kValuesPerVector<kT, 8>);
      return WithTile<kT, 8>(p, g, stream);
    case 4:
      g.vectors = vectors(kValuesPerVector<kT, 4>);
      return WithTile<kT, 4>(p, g, stream);
    case 2:
      if constexpr (kT != DataType::kFloat32) {
        g.vectors = vectors(kValuesPerVector<kT, 2>);
        return WithTile<kT, 2>(p, g, stream);
      }
      break;
    case 1:
      if constexpr (IsQuantized(kT)) {
        g.vectors = vectors(kValuesPerVector<kT, 1>);
        return WithTile<kT, 1>(p, g, stream);
      }
      break;
    case 0:
      if constexpr (kT == DataType::kInt4Rowwise) {
        g.vectors = p.dim;
        return WithTile<kT, 0>(p, g, stream);
      }
      break;
    default:
      break;
  }
  return cudaErrorInvalidValue;
}

}  // namespace

cudaError_t LaunchBagKernel(const LookupProblem& bags, cudaStream_t stream) {
  (void)cudaGetLastError();  // a stale non-sticky error is not this launch's
  switch (bags.table_type) {
    case DataType::kFloat32:
      return WithVector<DataType::kFloat32>(bags, stream);
    case DataType::kFloat16:
      return WithVector<DataType::kFloat16>(bags, stream);
    case DataType::kBFloat16:
      return WithVector<DataType::kBFloat16>(bags, stream);
    case DataType::kInt8Rowwise:
      return WithVector<DataType::kInt8Rowwise>(bags, stream);
    case DataType::kInt4Rowwise:
      return WithVector<DataType::kInt4Rowwise>(bags, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace emb::kernels::bags
