#include "bench/kernels/gather_variant.h"

#include <mutex>

#include "absl/status/statusor.h"
#include "kernels/gather_plan.h"
#include "kernels/gather_tuning.h"
#include "kernels/lookup.h"

namespace emb::bench {
namespace {

constexpr int kMaxDevices = 64;

// Tunings by device, read once each.
struct TuningCache {
  std::mutex mu;
  bool ready[kMaxDevices] = {};
  kernels::GatherTuning tuning[kMaxDevices];
};

TuningCache& Cache() {
  static TuningCache* cache = new TuningCache;  // never destroyed: used at any exit order
  return *cache;
}

}  // namespace

cudaError_t CurrentDeviceTuning(kernels::GatherTuning* out) {
  int device = 0;
  if (const cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) {
    return e;
  }
  if (device < 0 || device >= kMaxDevices) {
    return cudaErrorInvalidDevice;
  }
  TuningCache& cache = Cache();
  std::lock_guard<std::mutex> lock(cache.mu);
  if (!cache.ready[device]) {
    absl::StatusOr<kernels::GatherTuning> t = kernels::GetGatherTuning(device);
    if (!t.ok()) {
      return cudaErrorInvalidValue;
    }
    cache.tuning[device] = *t;
    cache.ready[device] = true;
  }
  *out = cache.tuning[device];
  return cudaSuccess;
}

using kernels::GatherPath;
using kernels::GatherPlan;

bool GatherVariantFromBits(int bits, GatherVariant* variant) {
  const int path = (bits >> 5) & 3;
  const bool passes = (bits & 128) != 0;
  if (bits < 0 || bits >= 256 || (bits & 3) >= kernels::kGatherUnrollLevels ||
      (passes && path != 0)) {
    return false;
  }
  constexpr GatherPath kPaths[] = {GatherPath::kUnits, GatherPath::kSliceOwners,
                                   GatherPath::kRowOwners, GatherPath::kUnits};
  variant->by_rule = path == 3;
  variant->plan.path = passes ? GatherPath::kColumnPasses : kPaths[path];
  variant->plan.unroll_level = bits & 3;
  variant->plan.interleaved = (bits & 4) != 0;
  variant->plan.streaming_stores = (bits & 8) == 0;
  variant->plan.table_evict_last = (bits & 16) != 0;
  variant->plan.max_blocks = 0;
  return true;
}

GatherPlan PlanOfVariant(const kernels::GatherTuning& tuning, const GatherVariant& variant,
                         int max_blocks, const kernels::GatherProblem& problem) {
  GatherPlan plan = variant.plan;
  if (variant.by_rule) {
    const GatherPlan rule = kernels::PlanGather(tuning, problem);
    if (rule.path != GatherPath::kUnits) {
      plan = rule;
    }
    plan.path = rule.path;
  } else if (!kernels::GatherPathFits(tuning, plan.path, problem)) {
    plan.path = GatherPath::kUnits;
  }
  plan.max_blocks = max_blocks;
  return plan;
}

}  // namespace emb::bench
