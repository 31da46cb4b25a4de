#include "kernels/lookup.h"

#include "absl/strings/str_cat.h"
#include "kernels/bags/bag_launch.h"
#include "kernels/cuda_status.h"
#include "kernels/gather/units_launch.h"
#include "kernels/gather_plan.h"

namespace emb::kernels {
namespace {

// Reads the properties of the current device (`device`) into a tuning.
absl::StatusOr<GatherTuning> TuningOfCurrent(int device) {
  GatherTuning t;
  t.device = device;
  int l2 = 0;
  EMB_CUDA_RETURN_IF_ERROR(
      cudaDeviceGetAttribute(&t.num_sms, cudaDevAttrMultiProcessorCount, device),
      "cudaDevAttrMultiProcessorCount");
  EMB_CUDA_RETURN_IF_ERROR(
      cudaDeviceGetAttribute(&t.max_threads_per_sm, cudaDevAttrMaxThreadsPerMultiProcessor, device),
      "cudaDevAttrMaxThreadsPerMultiProcessor");
  EMB_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device),
                           "cudaDevAttrL2CacheSize");
  t.l2_cache_bytes = l2;
  EMB_CUDA_RETURN_IF_ERROR(
      cudaDeviceGetAttribute(&t.cc_major, cudaDevAttrComputeCapabilityMajor, device),
      "cudaDevAttrComputeCapabilityMajor");
  EMB_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&t.smem_per_block_optin,
                                                  cudaDevAttrMaxSharedMemoryPerBlockOptin, device),
                           "cudaDevAttrMaxSharedMemoryPerBlockOptin");
  t.threads_per_block = kGatherBlockThreads;
  EMB_CUDA_RETURN_IF_ERROR(gather::GatherBlocksPerSm(&t.blocks_per_sm), "gather occupancy");
  if (t.num_sms < 1 || t.blocks_per_sm < 1) {
    return absl::InternalError(absl::StrCat("device ", device, " reports ", t.num_sms,
                                            " multiprocessors and room for ", t.blocks_per_sm,
                                            " gather blocks on each"));
  }
  return t;
}

}  // namespace

absl::StatusOr<int> DeviceCount() {
  int n = 0;
  EMB_CUDA_RETURN_IF_ERROR(cudaGetDeviceCount(&n), "cudaGetDeviceCount");
  return n;
}

absl::StatusOr<GatherTuning> GetGatherTuning(int device) {
  absl::StatusOr<int> count = DeviceCount();
  if (!count.ok()) {
    return count.status();
  }
  if (device < 0 || device >= *count) {
    return absl::InvalidArgumentError(
        absl::StrCat("CUDA device ", device, " of ", *count, " devices"));
  }
  int previous = 0;
  EMB_CUDA_RETURN_IF_ERROR(cudaGetDevice(&previous), "cudaGetDevice");
  if (previous != device) {
    EMB_CUDA_RETURN_IF_ERROR(cudaSetDevice(device), absl::StrCat("cudaSetDevice(", device, ")"));
  }
  absl::StatusOr<GatherTuning> tuning = TuningOfCurrent(device);
  if (previous != device) {
    const absl::Status restored =
        CudaStatus(cudaSetDevice(previous), absl::StrCat("cudaSetDevice(", previous, ")"));
    if (tuning.ok() && !restored.ok()) {
      return restored;
    }
  }
  return tuning;
}

LookupFamily LookupFamilyOf(const LookupProblem& p) {
  const bool one_id_a_row = p.offsets == nullptr && p.weights == nullptr && p.scales == nullptr;
  return one_id_a_row && IsValueType(p.table_type) && p.cached.slots == nullptr
             ? LookupFamily::kGather
             : LookupFamily::kBags;
}

absl::Status LaunchLookup(const GatherTuning& tuning, const LookupProblem& p, cudaStream_t stream) {
  if (!IsDataType(p.table_type) || !IsValueType(p.out_type)) {
    return absl::InvalidArgumentError(absl::StrCat("lookup from data type ",
                                                   static_cast<int>(p.table_type), " to ",
                                                   static_cast<int>(p.out_type)));
  }
  if (p.dim < 1 || p.rows < 0 || p.num_bags < 0) {
    return absl::InvalidArgumentError(absl::StrCat("lookup of ", p.num_bags, " answer rows from ",
                                                   p.rows, " rows of dim ", p.dim));
  }
  if (p.num_bags == 0) {
    return absl::OkStatus();
  }
  if (p.table == nullptr || p.ids == nullptr || p.out == nullptr) {
    return absl::InvalidArgumentError("lookup with a null table, ids or answer");
  }
  if ((p.cached.slots == nullptr) != (p.cached.cache == nullptr)) {
    return absl::InvalidArgumentError("lookup with a cache but no slots, or slots but no cache");
  }
  if (tuning.num_sms < 1 || tuning.max_threads_per_sm < 1) {
    return absl::FailedPreconditionError("lookup tuning not from GetGatherTuning");
  }
  if (LookupFamilyOf(p) == LookupFamily::kGather) {
    const GatherProblem g{p.table, p.table_type, p.rows, p.dim,
                          p.ids,   p.num_bags,   p.out,  p.out_type};
    EMB_CUDA_RETURN_IF_ERROR(LaunchCheckedGatherPlan(tuning, PlanGather(tuning, g), g, stream),
                             "gather launch");
  } else {
    EMB_CUDA_RETURN_IF_ERROR(bags::LaunchBagKernel(p, stream), "bag kernel launch");
  }
#if defined(EMB_CUDA_DEBUG_SYNC)
  EMB_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream), "lookup (EMB_CUDA_DEBUG_SYNC)");
#endif
  return absl::OkStatus();
}

}  // namespace emb::kernels
