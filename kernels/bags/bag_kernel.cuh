// The bag kernel (LookupFamily::kBags, kernels/lookup.h): pools bags of rows, or gathers rows, from
// a table of any type. Private to kernels/.
//
// A group of `group` lanes (a power of two up to a warp) owns one (bag, column tile). Lane l of
// the group loads vector l + group * k (k < kTileVectors) of each of the bag's rows, kVecBytes
// bytes each, so that a group's loads of a row are one contiguous run; it loads kUnroll rows
// before it adds any (several misses in flight), then adds them in id order, each product and
// each sum rounded once (CpuPooledGather's order, so the results agree to the bit). For a table in
// two tiers (CachedRows) each row is read from the cache or the host rows, as its slot says. A
// plain gather (bags of one id, no weights or scales) runs GatherKernel: a group loads several rows
// at once, each for its own answer row.
#ifndef EMB_KERNELS_BAGS_BAG_KERNEL_CUH_
#define EMB_KERNELS_BAGS_BAG_KERNEL_CUH_

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/bags/bag_rows.cuh"
#include "kernels/bags/bag_tuning.cuh"
#include "kernels/data_type.h"
#include "kernels/lookup_problem.h"

namespace emb::kernels::bags {

// One (bag, column tile) `item`, for lane `lane` of its group; returns the host rows it read (for
// a table in two tiers, counted by the group's lane 0 in the first tile).
template <DataType kT, int kVecBytes, int kTileVectors, int kUnroll, bool kStage>
__device__ __forceinline__ unsigned PoolItem(const LookupProblem& p, const BagGrid& g, int64_t item,
                                             int lane) {
  constexpr int kValues = kValuesPerVector<kT, kVecBytes>;
  const int64_t bag = g.tiles == 1 ? item : item / g.tiles;  // a 64-bit divide only if needed
  const int64_t tile = item - bag * g.tiles;
  const int64_t first_vector = tile * g.group * kTileVectors + lane;
  const int64_t begin = p.offsets != nullptr ? p.offsets[bag] : bag;
  const int64_t end = p.offsets != nullptr ? p.offsets[bag + 1] : bag + 1;
  const bool weighted = p.weights != nullptr;
  const bool counting = tile == 0 && lane == 0;
  unsigned misses = 0;

  // The vector each of the lane's tile vectors loads: past the row's last vector (a lane beyond
  // it: vectors not a power of two, or the last tile), the last one, read and summed but never
  // stored. Loads without a bounds check take the kernel from 118 to 80 registers (float32 rows
  // of 128 at 8 rows a step): a predicated load keeps its old value live.
  int64_t loaded[kTileVectors];
#pragma unroll
  for (int k = 0; k < kTileVectors; ++k) {
    const int64_t v = first_vector + static_cast<int64_t>(k) * g.group;
    loaded[k] = v < g.vectors ? v : g.vectors - 1;
  }
  float acc[kTileVectors][kValues];
#pragma unroll
  for (int k = 0; k < kTileVectors; ++k) {
#pragma unroll
    for (int i = 0; i < kValues; ++i) {
      acc[k][i] = 0.0f;
    }
  }
  // Adds kRows rows of the bag, with ids `id(u)` and weights `weight(u)`: every load first,
  // then the sums in id order.
  auto add_rows = [&](auto rows_constant, auto id, auto weight) {
    constexpr int kRows = decltype(rows_constant)::value;
    // The ids, then the rows' addresses, then the rows: each step's loads all in flight at once
    // (a row's id loaded just before its row would wait for it, row after row).
    int64_t ids[kRows];
#pragma unroll
    for (int u = 0; u < kRows; ++u) {
      ids[u] = id(u);
    }
    const uint8_t* rows[kRows];
#pragma unroll
    for (int u = 0; u < kRows; ++u) {
      rows[u] = RowAddress(p, g, ids[u], counting, &misses);
    }
    RawVector<kVecBytes> raw[kRows][kTileVectors];
#pragma unroll
    for (int u = 0; u < kRows; ++u) {
#pragma unroll
      for (int k = 0; k < kTileVectors; ++k) {
        raw[u][k] = LoadVector<kT, kVecBytes>(rows[u], loaded[k] * kValues);
      }
    }
#pragma unroll
    for (int u = 0; u < kRows; ++u) {
      RowScale s{0.0f, 0.0f};
      if constexpr (IsQuantized(kT)) {
        s = LoadScale<kT>(rows[u], p.dim);
      }
      const float w = weight(u);
#pragma unroll
      for (int k = 0; k < kTileVectors; ++k) {
        float x[kValues];
        Decode<kT, kVecBytes>(raw[u][k], loaded[k] * kValues, s, x);
#pragma unroll
        for (int i = 0; i < kValues; ++i) {
          acc[k][i] = __fadd_rn(acc[k][i], weighted ? __fmul_rn(w, x[i]) : x[i]);
        }
      }
    }
  };
  if (kStage && g.group >= kUnroll) {
    // The group's lanes load the bag's ids and weights `group` at a time, one each (one
    // coalesced load), and each row's id comes from its lane by a shuffle: no id load waits in
    // front of each run of row loads. All the group's lanes run the same trips, so the shuffles
    // see all of them.
    const unsigned group_mask = g.group == 32 ? 0xffffffffu
                                              : ((1u << g.group) - 1u)
                                                    << ((threadIdx.x % 32) & ~(g.group - 1));
    for (int64_t base = begin; base < end;) {
      const int n = static_cast<int>(end - base < g.group ? end - base : g.group);
      const long long my_id = lane < n ? __ldg(p.ids + base + lane) : 0;
      const float my_weight = weighted && lane < n ? __ldg(p.weights + base + lane) : 1.0f;
      int u = 0;
      for (; u + kUnroll <= n; u += kUnroll) {
        add_rows(
            std::integral_constant<int, kUnroll>{},
            [&](int r) {
              return static_cast<int64_t>(__shfl_sync(group_mask, my_id, u + r, g.group));
            },
            [&](int r) {
              return weighted ? __shfl_sync(group_mask, my_weight, u + r, g.group) : 1.0f;
            });
      }
      for (; u < n; ++u) {
        add_rows(
            std::integral_constant<int, 1>{},
            [&](int) { return static_cast<int64_t>(__shfl_sync(group_mask, my_id, u, g.group)); },
            [&](int) { return weighted ? __shfl_sync(group_mask, my_weight, u, g.group) : 1.0f; });
      }
      base += n;
    }
  } else {
    auto id = [&](int64_t j) { return [&p, j](int u) { return __ldg(p.ids + j + u); }; };
    auto weight = [&](int64_t j) {
      return [&p, j, weighted](int u) { return weighted ? __ldg(p.weights + j + u) : 1.0f; };
    };
    int64_t j = begin;
    for (; j + kUnroll <= end; j += kUnroll) {
      add_rows(std::integral_constant<int, kUnroll>{}, id(j), weight(j));
    }
    for (; j < end; ++j) {
      add_rows(std::integral_constant<int, 1>{}, id(j), weight(j));
    }
  }
  const bool scaled = p.scales != nullptr;
  const float scale = scaled ? __ldg(p.scales + bag) : 1.0f;
  void* out_row = static_cast<unsigned char*>(p.out) +
                  static_cast<size_t>(bag) * static_cast<size_t>(p.dim) * ElementSize(p.out_type);
#pragma unroll
  for (int k = 0; k < kTileVectors; ++k) {
    const int64_t v = first_vector + static_cast<int64_t>(k) * g.group;
    if (v < g.vectors) {
      if (scaled) {
#pragma unroll
        for (int i = 0; i < kValues; ++i) {
          acc[k][i] = __fmul_rn(acc[k][i], scale);
        }
      }
      StoreOut<kValues>(out_row, p.out_type, v * kValues, acc[k]);
    }
  }
  return misses;
}

// A gather (no offsets, weights or scales): a group owns kRows consecutive ids and a column
// tile, loads all of their rows before it converts any (kRows rows' misses in flight, where a bag
// of one id would have one), and writes each row's tile to its own answer row, each element
// rounded once (CpuGather's results, -0.0 kept). Returns the host rows read, as PoolItem.
template <DataType kT, int kVecBytes, int kTileVectors, int kRows>
__device__ __forceinline__ unsigned GatherItem(const LookupProblem& p, const BagGrid& g,
                                               int64_t item, int lane) {
  constexpr int kValues = kValuesPerVector<kT, kVecBytes>;
  const int64_t block = g.tiles == 1 ? item : item / g.tiles;  // a 64-bit divide only if needed
  const int64_t first = block * kRows;
  const int64_t tile = item - block * g.tiles;
  const int64_t first_vector = tile * g.group * kTileVectors + lane;
  const bool counting = tile == 0 && lane == 0;
  unsigned misses = 0;
  // Every load of every row first, a quantized row's scale and bias with its values: the stores
  // below may alias the table as far as the compiler knows, so a load left until after a store
  // would wait for it, one row's latency after another.
  // The ids, then the rows' addresses (a host tier's slots), then the rows, each step's loads all
  // in flight at once: a row's id loaded just before its row would wait for it, row after row.
  // Past the last id, row 0 stands in (read, never written).
  int64_t ids[kRows];
#pragma unroll
  for (int u = 0; u < kRows; ++u) {
    ids[u] = first + u < p.num_bags ? __ldg(p.ids + first + u) : 0;
  }
  const uint8_t* addresses[kRows];
#pragma unroll
  for (int u = 0; u < kRows; ++u) {
    addresses[u] = RowAddress(p, g, ids[u], counting && first + u < p.num_bags, &misses);
  }
  RawVector<kVecBytes> raw[kRows][kTileVectors];
  RowScale scales[kRows];
#pragma unroll
  for (int u = 0; u < kRows; ++u) {
    if (first + u < p.num_bags) {
      const uint8_t* row = addresses[u];
#pragma unroll
      for (int k = 0; k < kTileVectors; ++k) {
        const int64_t v = first_vector + static_cast<int64_t>(k) * g.group;
        if (v < g.vectors) {
          raw[u][k] = LoadVector<kT, kVecBytes>(row, v * kValues);
        }
      }
      if constexpr (IsQuantized(kT)) {
        scales[u] = LoadScale<kT>(row, p.dim);
      }
    }
  }
  const size_t out_row_bytes = static_cast<size_t>(p.dim) * ElementSize(p.out_type);
#pragma unroll
  for (int u = 0; u < kRows; ++u) {
    if (first + u < p.num_bags) {
      const RowScale s = IsQuantized(kT) ? scales[u] : RowScale{0.0f, 0.0f};
      void* out_row =
          static_cast<unsigned char*>(p.out) + static_cast<size_t>(first + u) * out_row_bytes;
#pragma unroll
      for (int k = 0; k < kTileVectors; ++k) {
        const int64_t v = first_vector + static_cast<int64_t>(k) * g.group;
        if (v < g.vectors) {
          float x[kValues];
          Decode<kT, kVecBytes>(raw[u][k], v * kValues, s, x);
          StoreOut<kValues>(out_row, p.out_type, v * kValues, x);
        }
      }
    }
  }
  return misses;
}

template <DataType kT, int kVecBytes, int kTileVectors, int kRows>
__global__ void __launch_bounds__(kBlockThreads, kGatherMinBlocks)
    GatherKernel(const LookupProblem p, const BagGrid g) {
  const int64_t thread = static_cast<int64_t>(blockIdx.x) * kBlockThreads + threadIdx.x;
  const int64_t item = thread >> (__ffs(g.group) - 1);  // g.group is a power of two
  const int lane = static_cast<int>(thread & (g.group - 1));
  unsigned misses = 0;
  if (item < (p.num_bags + kRows - 1) / kRows * g.tiles) {
    misses = GatherItem<kT, kVecBytes, kTileVectors, kRows>(p, g, item, lane);
  }
  if (p.cached.misses != nullptr) {  // the same for every thread: all reach the barriers
    CountMisses(p.cached.misses, misses);
  }
}

// kStage: whether a group stages its bag's ids (kStageIds, for bags of kShortBagIds or more);
// kMinBlocks: the bound on registers (kBagMinBlocks, or kShortMinBlocks for short bags).
template <DataType kT, int kVecBytes, int kTileVectors, int kUnroll, bool kStage, int kMinBlocks>
__global__ void __launch_bounds__(kBlockThreads, kMinBlocks)
    BagKernel(const LookupProblem p, const BagGrid g) {
  const int64_t thread = static_cast<int64_t>(blockIdx.x) * kBlockThreads + threadIdx.x;
  const int64_t item = thread >> (__ffs(g.group) - 1);  // g.group is a power of two
  const int lane = static_cast<int>(thread & (g.group - 1));
  unsigned misses = 0;
  if (item < p.num_bags * g.tiles) {
    misses = PoolItem<kT, kVecBytes, kTileVectors, kUnroll, kStage>(p, g, item, lane);
  }
  if (p.cached.misses != nullptr) {  // the same for every thread: all reach the barriers
    CountMisses(p.cached.misses, misses);
  }
}

}  // namespace emb::kernels::bags

#endif  // EMB_KERNELS_BAGS_BAG_KERNEL_CUH_
