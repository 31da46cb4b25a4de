// The table-batched lookup kernel (LaunchFeatureLookup, kernels/feature_lookup.h): every bag of
// every feature of a batch, over all of the call's tables, in one launch. Private to kernels/.
//
// The grid is the flat list of bags, feature-major (bag f * batch + s); a group of `group` lanes
// (a power of two up to a warp) owns one bag. The group reads its feature's descriptor and table
// once, picks the widest vector the table's rows allow (VectorBytes) and walks its columns in
// passes of `group` vectors, lane l loading vector l of the pass from each row. Rows are loaded
// kFeatureUnroll<kT> at a time before any is added (several misses in flight), then added in id
// order, each product and each sum rounded once (CpuPooledGather's order, so the results agree to
// the bit). A group of kFeatureUnroll<kT> lanes or more loads its bag's ids `group` at a time,
// one a lane, and hands each row's id round by a shuffle. Row decoding is the bag kernels'
// (kernels/bags/bag_rows.cuh).
#ifndef EMB_KERNELS_FEATURES_FEATURE_KERNEL_CUH_
#define EMB_KERNELS_FEATURES_FEATURE_KERNEL_CUH_

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "kernels/bags/bag_rows.cuh"
#include "kernels/data_type.h"
#include "kernels/feature_lookup_problem.h"
#include "kernels/quantize.h"

// Blocks each SM must be able to hold, a bound on registers a thread. Unbound (1), the kernel
// takes 128 registers and spills a little; bound to 3 or 4 blocks it spills 1.3 to 4.8 KB (ptxas,
// sm_90): not yet measured on a GPU. Builds for benchmarks may set -DEMB_FEATURE_MIN_BLOCKS=N.
#ifndef EMB_FEATURE_MIN_BLOCKS
#define EMB_FEATURE_MIN_BLOCKS 1
#endif

namespace emb::kernels::features {

inline constexpr int kFeatureBlockThreads = 256;
// Rows a group loads before it adds them: fewer for quantized rows, whose decoding holds more
// registers, so that every path fits the kernel's register bound.
template <DataType kT>
inline constexpr int kFeatureUnroll = IsQuantized(kT) ? 4 : 8;
inline constexpr int kFeatureMinBlocks = EMB_FEATURE_MIN_BLOCKS;

// One bag: sample `sample` of feature `feature`, the ids [begin, end).
struct Bag {
  int64_t feature;
  int64_t sample;
  int64_t begin;
  int64_t end;
};

// The lanes of one bag's group, as one lane sees them.
struct Lanes {
  int lane;       // in [0, group)
  int group;      // a power of two, up to 32
  unsigned mask;  // the group's lanes within the warp
};

// Where row `id` of `t` (rows of `row_bytes`) is: in its rows, or for a table in two tiers in
// its cache or its host rows; adds one to `misses` for a host row when `counting`.
__device__ __forceinline__ const uint8_t* FeatureRow(const FeatureTable& t, size_t row_bytes,
                                                     int64_t id, bool counting, unsigned* misses) {
  if (t.cached.slots != nullptr) {
    const int32_t slot = __ldg(t.cached.slots + id);
    if (slot >= 0) {
      return static_cast<const uint8_t*>(t.cached.cache) + static_cast<size_t>(slot) * row_bytes;
    }
    *misses += counting ? 1 : 0;
  }
  return static_cast<const uint8_t*>(t.rows) + static_cast<size_t>(id) * row_bytes;
}

// Loads kRows rows (ids id_of(u), u < kRows) at element `col`, all of them before any is
// decoded, then calls visit(first + u, x, weight_of(u)) in id order with each row's decoded
// vector x.
template <DataType kT, int kVecBytes, int kRows, typename IdOf, typename WeightOf, typename Visit>
__device__ __forceinline__ void VisitRows(const FeatureTable& t, size_t row_bytes, int64_t col,
                                          int64_t first, IdOf id_of, WeightOf weight_of,
                                          bool counting, unsigned* misses, Visit& visit) {
  constexpr int kValues = bags::kValuesPerVector<kT, kVecBytes>;
  int64_t ids[kRows];
#pragma unroll
  for (int u = 0; u < kRows; ++u) {
    ids[u] = id_of(u);
  }
  const uint8_t* rows[kRows];
#pragma unroll
  for (int u = 0; u < kRows; ++u) {
    rows[u] = FeatureRow(t, row_bytes, ids[u], counting, misses);
  }
  bags::RawVector<kVecBytes> raw[kRows];
#pragma unroll
  for (int u = 0; u < kRows; ++u) {
    raw[u] = bags::LoadVector<kT, kVecBytes>(rows[u], col);
  }
#pragma unroll
  for (int u = 0; u < kRows; ++u) {
    RowScale s{0.0f, 0.0f};
    if constexpr (IsQuantized(kT)) {
      s = bags::LoadScale<kT>(rows[u], t.dim);
    }
    float x[kValues];
    bags::Decode<kT, kVecBytes>(raw[u], col, s, x);
    visit(first + u, x, weight_of(u));
  }
}

// Calls visit(k, x, w) for each id k of [begin, end) in order: x the lane's vector of row
// ids[k] at element `col`, w its weight (1 unless `weighted`). Every lane of the group calls it
// with the same bag.
template <DataType kT, int kVecBytes, typename Visit>
__device__ __forceinline__ void WalkRows(const FeatureLookupProblem& p, const FeatureTable& t,
                                         size_t row_bytes, const Lanes& lanes, int64_t begin,
                                         int64_t end, bool weighted, int64_t col, bool counting,
                                         unsigned* misses, Visit& visit) {
  constexpr int kUnroll = kFeatureUnroll<kT>;
  constexpr auto kSteps = std::integral_constant<int, kUnroll>{};
  constexpr auto kOne = std::integral_constant<int, 1>{};
  const auto step = [&](auto rows_constant, int64_t first, auto id_of, auto weight_of) {
    VisitRows<kT, kVecBytes, decltype(rows_constant)::value>(t, row_bytes, col, first, id_of,
                                                             weight_of, counting, misses, visit);
  };
  if (lanes.group >= kUnroll) {
    // The group's lanes load the ids and weights `group` at a time (one coalesced load), and
    // each row's id comes from its lane by a shuffle. All lanes of the group run the same trips.
    for (int64_t base = begin; base < end;) {
      const int n = static_cast<int>(end - base < lanes.group ? end - base : lanes.group);
      const long long my_id = lanes.lane < n ? __ldg(p.ids + base + lanes.lane) : 0;
      const float my_weight =
          weighted && lanes.lane < n ? __ldg(p.weights + base + lanes.lane) : 1.0f;
      int u = 0;
      const auto id_at = [&](int r) {
        return static_cast<int64_t>(__shfl_sync(lanes.mask, my_id, u + r, lanes.group));
      };
      const auto weight_at = [&](int r) {
        return weighted ? __shfl_sync(lanes.mask, my_weight, u + r, lanes.group) : 1.0f;
      };
      for (; u + kUnroll <= n; u += kUnroll) {
        step(kSteps, base + u, id_at, weight_at);
      }
      for (; u < n; ++u) {
        step(kOne, base + u, id_at, weight_at);
      }
      base += n;
    }
    return;
  }
  int64_t j = begin;
  const auto id_at = [&](int r) { return __ldg(p.ids + j + r); };
  const auto weight_at = [&](int r) { return weighted ? __ldg(p.weights + j + r) : 1.0f; };
  for (; j + kUnroll <= end; j += kUnroll) {
    step(kSteps, j, id_at, weight_at);
  }
  for (; j < end; ++j) {
    step(kOne, j, id_at, weight_at);
  }
}

// `bag` of feature `f` from its table `t`, read kVecBytes at a time: pooled into row bag.sample of
// the pooled answer, or each row into the unpooled answer. Returns the host rows read (counted
// once, by the group's lane 0).
template <DataType kT, int kVecBytes>
__device__ __forceinline__ unsigned LookUpBag(const FeatureLookupProblem& p, const FeatureSpec& f,
                                              const FeatureTable& t, const Bag& bag,
                                              const Lanes& lanes) {
  constexpr int kValues = bags::kValuesPerVector<kT, kVecBytes>;
  const int64_t vectors = t.dim / kValues;
  const size_t row_bytes = RowBytes(kT, t.dim);
  const size_t element = ElementSize(p.out_type);
  unsigned misses = 0;
  for (int64_t pass = 0; pass < vectors; pass += lanes.group) {
    // A lane past the row's last vector loads the last one, and stores nothing.
    const int64_t v = pass + lanes.lane;
    const int64_t col = (v < vectors ? v : vectors - 1) * kValues;
    const bool counting = pass == 0 && lanes.lane == 0;
    if (f.pooling == Pooling::kNone) {
      const int64_t feature_first = p.offsets[bag.feature * p.batch];
      auto store = [&](int64_t k, const float* x, float) {
        if (v < vectors) {
          void* out_row = static_cast<unsigned char*>(p.unpooled_out) +
                          static_cast<size_t>(f.out_offset + (k - feature_first) * t.dim) * element;
          bags::StoreOut<kValues>(out_row, p.out_type, col, x);
        }
      };
      WalkRows<kT, kVecBytes>(p, t, row_bytes, lanes, bag.begin, bag.end, false, col, counting,
                              &misses, store);
      continue;
    }
    const bool weighted = f.weighted && p.weights != nullptr;
    float acc[kValues];
#pragma unroll
    for (int i = 0; i < kValues; ++i) {
      acc[i] = 0.0f;
    }
    auto add = [&](int64_t, const float* x, float w) {
#pragma unroll
      for (int i = 0; i < kValues; ++i) {
        acc[i] = __fadd_rn(acc[i], weighted ? __fmul_rn(w, x[i]) : x[i]);
      }
    };
    WalkRows<kT, kVecBytes>(p, t, row_bytes, lanes, bag.begin, bag.end, weighted, col, counting,
                            &misses, add);
    if (v < vectors) {
      if (f.pooling == Pooling::kMean) {
        // CpuFeatureLookup's mean: the sum times 1 / length, each rounded once (0 for no ids).
        const int64_t length = bag.end - bag.begin;
        const float scale = length > 0 ? __fdiv_rn(1.0f, static_cast<float>(length)) : 0.0f;
#pragma unroll
        for (int i = 0; i < kValues; ++i) {
          acc[i] = __fmul_rn(acc[i], scale);
        }
      }
      void* out_row = static_cast<unsigned char*>(p.pooled_out) +
                      static_cast<size_t>(bag.sample * p.pooled_width) * element;
      bags::StoreOut<kValues>(out_row, p.out_type, f.out_column + col, acc);
    }
  }
  return misses;
}

// LookUpBag with the widest vector that table `t`'s rows allow.
template <DataType kT>
__device__ __forceinline__ unsigned LookUpBagOfType(const FeatureLookupProblem& p,
                                                    const FeatureSpec& f, const FeatureTable& t,
                                                    const Bag& bag, const Lanes& lanes) {
  const int b = bags::VectorBytes(
      kT, t.dim, reinterpret_cast<uintptr_t>(t.rows) | reinterpret_cast<uintptr_t>(t.cached.cache));
  switch (b) {
    case 16:
      if constexpr (kT != DataType::kInt4Rowwise) {
        return LookUpBag<kT, 16>(p, f, t, bag, lanes);
      }
      break;
    case 8:
      return LookUpBag<kT, 8>(p, f, t, bag, lanes);
    case 4:
      return LookUpBag<kT, 4>(p, f, t, bag, lanes);
    case 2:
      if constexpr (kT != DataType::kFloat32) {
        return LookUpBag<kT, 2>(p, f, t, bag, lanes);
      }
      break;
    case 1:
      if constexpr (IsQuantized(kT)) {
        return LookUpBag<kT, 1>(p, f, t, bag, lanes);
      }
      break;
    case 0:
      if constexpr (kT == DataType::kInt4Rowwise) {
        return LookUpBag<kT, 0>(p, f, t, bag, lanes);
      }
      break;
    default:
      break;
  }
  return 0;
}

// One group of `group` lanes per bag (f, s), bag f * batch + s of the flat list. Requires group
// a power of two up to 32 dividing kFeatureBlockThreads, every table and feature descriptor
// valid (CheckFeatureDescriptors), ids in range and offsets not decreasing.
__global__ void __launch_bounds__(kFeatureBlockThreads, kFeatureMinBlocks)
    FeatureLookupKernel(const FeatureLookupProblem p, int group) {
  const int64_t thread = static_cast<int64_t>(blockIdx.x) * kFeatureBlockThreads + threadIdx.x;
  const int64_t index = thread >> (__ffs(group) - 1);
  if (index >= static_cast<int64_t>(p.num_features) * p.batch) {
    return;  // the whole group: bags do not straddle groups
  }
  Lanes lanes;
  lanes.group = group;
  lanes.lane = static_cast<int>(thread & (group - 1));
  lanes.mask =
      group == 32 ? 0xffffffffu : ((1u << group) - 1u) << ((threadIdx.x % 32) & ~(group - 1));
  Bag bag;
  bag.feature = index / p.batch;
  bag.sample = index - bag.feature * p.batch;
  bag.begin = p.offsets[index];
  bag.end = p.offsets[index + 1];
  const FeatureSpec f = p.features[bag.feature];
  const FeatureTable t = p.tables[f.table];
  unsigned misses = 0;
  switch (t.type) {
    case DataType::kFloat32:
      misses = LookUpBagOfType<DataType::kFloat32>(p, f, t, bag, lanes);
      break;
    case DataType::kFloat16:
      misses = LookUpBagOfType<DataType::kFloat16>(p, f, t, bag, lanes);
      break;
    case DataType::kBFloat16:
      misses = LookUpBagOfType<DataType::kBFloat16>(p, f, t, bag, lanes);
      break;
    case DataType::kInt8Rowwise:
      misses = LookUpBagOfType<DataType::kInt8Rowwise>(p, f, t, bag, lanes);
      break;
    case DataType::kInt4Rowwise:
      misses = LookUpBagOfType<DataType::kInt4Rowwise>(p, f, t, bag, lanes);
      break;
  }
  if (misses != 0 && t.cached.misses != nullptr) {
    atomicAdd(t.cached.misses + index % CachedRows::kMissCounters,
              static_cast<unsigned long long>(misses));
  }
}

}  // namespace emb::kernels::features

#endif  // EMB_KERNELS_FEATURES_FEATURE_KERNEL_CUH_
