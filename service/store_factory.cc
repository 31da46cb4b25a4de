#include "service/store_factory.h"

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "service/cpu_store.h"
#include "service/status_macros.h"

#if EMB_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "service/gpu_store.h"
#endif

namespace emb::service {
namespace {

int VisibleGpus() {
#if EMB_HAVE_CUDA
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return count;
#else
  return 0;
#endif
}

}  // namespace

absl::StatusOr<std::string> ResolveDevice(const std::string& flag) {
  if (flag == "cpu") {
    return flag;
  }
  if (flag == "auto") {
    return VisibleGpus() > 0 ? "cuda:0" : "cpu";
  }
  int index = 0;
  if (flag != "cuda" &&
      !(absl::StartsWith(flag, "cuda:") &&
        absl::SimpleAtoi(absl::string_view(flag).substr(5), &index) && index >= 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--device=", flag, ": expected auto, cpu, cuda or cuda:N"));
  }
#if !EMB_HAVE_CUDA
  return absl::InvalidArgumentError(absl::StrCat(
      "--device=", flag, ": this build has no CUDA backend (nvcc was not found at build time)"));
#else
  const int gpus = VisibleGpus();
  if (index >= gpus) {
    return absl::InvalidArgumentError(
        absl::StrCat("--device=", flag, ": ", gpus, " CUDA device(s) visible, so no cuda:", index));
  }
  return absl::StrCat("cuda:", index);
#endif
}

absl::StatusOr<std::unique_ptr<EmbeddingStore>> CreateStore(const TableSource& source,
                                                            const std::string& device,
                                                            const StoreOptions& options) {
  if (device == "cpu") {
    ASSIGN_OR_RETURN(std::unique_ptr<CpuStore> store,
                     CpuStore::Create(source, options.max_batch_ids));
    return std::unique_ptr<EmbeddingStore>(std::move(store));
  }
#if EMB_HAVE_CUDA
  int index = 0;
  (void)absl::SimpleAtoi(absl::string_view(device).substr(5), &index);
  ASSIGN_OR_RETURN(std::unique_ptr<GpuStore> store, GpuStore::Create(source, index, options));
  return std::unique_ptr<EmbeddingStore>(std::move(store));
#else
  return absl::InvalidArgumentError(absl::StrCat("no backend for device ", device));
#endif
}

}  // namespace emb::service
