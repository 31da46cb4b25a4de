#include "kernels/embedding_lookup.h"

#include "absl/strings/str_cat.h"
#include "kernels/cuda_status.h"
#include "kernels/gather/units_launch.h"
#include "kernels/gather_plan.h"
#include "kernels/pooled_lookup.h"

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

absl::Status LaunchGather(const GatherTuning& tuning, const void* d_table, DataType table_type,
                          int64_t num_rows, int64_t dim, const int64_t* d_ids, int64_t num_ids,
                          void* d_out, DataType out_type, cudaStream_t stream) {
  if (!IsDataType(table_type) || !IsValueType(out_type)) {
    return absl::InvalidArgumentError(absl::StrCat("gather from data type ",
                                                   static_cast<int>(table_type), " to ",
                                                   static_cast<int>(out_type)));
  }
  if (dim < 1 || num_rows < 0 || num_ids < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("gather of ", num_ids, " ids from ", num_rows, " rows of dim ", dim));
  }
  if (num_ids == 0) {
    return absl::OkStatus();
  }
  if (d_table == nullptr || d_ids == nullptr || d_out == nullptr) {
    return absl::InvalidArgumentError("gather with a null device pointer");
  }
  if (tuning.num_sms < 1 || tuning.max_threads_per_sm < 1) {
    return absl::FailedPreconditionError("gather tuning not from GetGatherTuning");
  }
  int current = 0;
  EMB_CUDA_RETURN_IF_ERROR(cudaGetDevice(&current), "cudaGetDevice");
  if (current != tuning.device) {
    return absl::FailedPreconditionError(
        absl::StrCat("gather tuned for device ", tuning.device, " launched on device ", current));
  }
  if (IsQuantized(table_type)) {
    return LaunchQuantizedGather(d_table, table_type, num_rows, dim, d_ids, num_ids, d_out,
                                 out_type, stream);
  }
  const GatherProblem problem{d_table, table_type, num_rows, dim, d_ids, num_ids, d_out, out_type};
  EMB_CUDA_RETURN_IF_ERROR(LaunchGatherPlan(tuning, PlanGather(tuning, problem), problem, stream),
                           "gather launch");
#if defined(EMB_CUDA_DEBUG_SYNC)
  EMB_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream), "gather (EMB_CUDA_DEBUG_SYNC)");
#endif
  return absl::OkStatus();
}

}  // namespace emb::kernels
