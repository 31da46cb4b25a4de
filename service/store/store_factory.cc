#include "service/store/store_factory.h"

#include "absl/strings/str_cat.h"
#include "service/common/status_macros.h"
#include "service/store/cpu_store.h"

#if EMB_HAVE_CUDA
#include "service/store/gpu/assembly_rows.h"
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

MultiDeviceStore::AssemblyFactory RowAssemblyOn(const std::vector<Device>& devices,
                                                const StoreOptions& options) {
  for (const Device& d : devices) {
    if (!d.cuda) {
      return nullptr;
    }
  }
#if EMB_HAVE_CUDA
  const int device = devices.front().index;
  return [device, options](const TableInfo& table,
                           int64_t max_batch_ids) -> absl::StatusOr<std::unique_ptr<RowAssembly>> {
    // The rows staged as the table holds them where that is a value type (so conversions and
    // pooling read what one device's kernels read), else as float32 (a quantized table's values).
    const DataType type = IsValueType(table.dtype) ? table.dtype : DataType::kFloat32;
    const int slots = options.inflight_batches;
    const CudaCheck check(device, options.on_device_lost);
    ASSIGN_OR_RETURN(std::unique_ptr<AssemblyRows> rows,
                     AssemblyRows::Create(check, type, table.dim, slots, max_batch_ids));
    auto assembly = std::make_unique<RowAssembly>();
    AssemblyRows* staging = rows.get();
    assembly->row_at = [staging](int block, int64_t row) { return staging->RowAt(block, row); };
    assembly->type = type;
    assembly->slots = slots;
    assembly->block_rows = max_batch_ids;
    assembly->device_bytes = rows->bytes() + GpuStore::BatchBufferBytes(options, table.dim);
    TableInfo info;
    info.name = absl::StrCat(table.name, " (row split assembly)");
    info.rows = static_cast<int64_t>(slots) * max_batch_ids;
    info.dim = table.dim;
    info.dtype = type;
    info.ids = RowRange::Whole(info.rows);
    ASSIGN_OR_RETURN(assembly->store,
                     GpuStore::CreateOver(std::move(info), std::move(rows), device, options));
    return assembly;
  };
#else
  (void)options;
  return nullptr;
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
