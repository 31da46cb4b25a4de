#include "service/store/store_factory.h"

#include "absl/strings/str_cat.h"
#include "service/common/status_macros.h"
#include "service/store/cpu_store.h"

#if EMB_HAVE_CUDA
#include "service/store/gpu/gpu_store.h"
#include "service/store/gpu/pinned_answer_memory.h"
#endif

namespace emb::service {

absl::StatusOr<std::unique_ptr<EmbeddingStore>> CreateStore(const TableSource& source,
                                                            const Device& device,
                                                            const StoreOptions& options) {
  if (!device.cuda) {
    ASSIGN_OR_RETURN(std::unique_ptr<CpuStore> store, CpuStore::Create(source, options));
    return std::unique_ptr<EmbeddingStore>(std::move(store));
  }
#if EMB_HAVE_CUDA
  ASSIGN_OR_RETURN(std::unique_ptr<GpuStore> store,
                   GpuStore::Create(source, device.index, options));
  return std::unique_ptr<EmbeddingStore>(std::move(store));
#else
  return absl::InvalidArgumentError(absl::StrCat("no backend for device ", device.name()));
#endif
}

std::shared_ptr<const HostAllocator> CreateAnswerMemory(const Device& device) {
#if EMB_HAVE_CUDA
  if (device.cuda) {
    return std::make_shared<PinnedAnswerMemory>(device.index);
  }
#endif
  (void)device;
  return nullptr;
}

}  // namespace emb::service
