#include "service/store/store_factory.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "service/common/status_macros.h"
#include "service/store/cpu_store.h"

#if EMB_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "service/common/log.h"
#include "service/store/gpu/cuda_check.h"
#include "service/store/gpu/device_rows.h"
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

namespace {

// The staging rows of a row split of `table`: in the table's type where that is a value type (so
// conversions and pooling read what one device's kernels read), else float32 (a quantized
// table's values); `slots` blocks of `block_rows`.
TableInfo AssemblyInfo(const TableInfo& table, int slots, int64_t block_rows) {
  TableInfo info;
  info.name = absl::StrCat(table.name, " (row split assembly)");
  info.rows = static_cast<int64_t>(slots) * block_rows;
  info.dim = table.dim;
  info.dtype = IsValueType(table.dtype) ? table.dtype : DataType::kFloat32;
  info.ids = RowRange::Whole(info.rows);
  return info;
}

#if EMB_HAVE_CUDA
// Lets each GPU of `devices` copy straight into the memory of `to` and back (peer access), where
// the two can: a part's rows then reach the assembly over NVLink or PCIe without a host bounce.
// Without it the copies still work (CUDA stages them through the host).
absl::Status EnablePeerAccess(const std::vector<Device>& devices, int to,
                              const StoreOptions& options) {
  for (const Device& d : devices) {
    if (d.index == to) {
      continue;
    }
    int can = 0;
    RETURN_IF_ERROR(CudaCheck(d.index, options.on_device_lost)(
        cudaDeviceCanAccessPeer(&can, d.index, to), "cudaDeviceCanAccessPeer"));
    if (can == 0) {
      LogInfo("cuda:", d.index, " cannot reach cuda:", to,
              "'s memory directly: a row split's rows pass through the host");
      continue;
    }
    for (const auto& [from, peer] : {std::pair{d.index, to}, std::pair{to, d.index}}) {
      // A sticky error here is `from`'s: its context is the one the call ran in.
      const CudaCheck check(from, options.on_device_lost);
      RETURN_IF_ERROR(check(cudaSetDevice(from), "cudaSetDevice"));
      const cudaError_t e = cudaDeviceEnablePeerAccess(peer, 0);
      if (e == cudaErrorPeerAccessAlreadyEnabled) {
        (void)cudaGetLastError();  // not an error: another table enabled it
      } else {
        RETURN_IF_ERROR(check(e, "cudaDeviceEnablePeerAccess"));
      }
    }
  }
  return absl::OkStatus();
}
#endif

}  // namespace

MultiDeviceStore::AssemblyFactory HostRowAssembly(const StoreOptions& options) {
  return [options](const TableInfo& table,
                   int64_t block_rows) -> absl::StatusOr<std::unique_ptr<RowAssembly>> {
    const int slots = options.inflight_batches;
    TableInfo info = AssemblyInfo(table, slots, block_rows);
    const size_t row_bytes = RowBytes(info.dtype, info.dim);
    ASSIGN_OR_RETURN(std::unique_ptr<HugePageRows> rows,
                     HugePageRows::Allocate(static_cast<size_t>(info.rows) * row_bytes,
                                            absl::StrCat("the staging rows of ", info.name)));
    auto assembly = std::make_unique<RowAssembly>();
    std::byte* base = rows->mutable_data();
    assembly->rows_at = [base, block_rows, row_bytes](int block, int64_t row, int64_t n) {
      std::byte* first = base + static_cast<size_t>(block * block_rows + row) * row_bytes;
      return AnswerSpan{absl::MakeSpan(first, static_cast<size_t>(n) * row_bytes), nullptr};
    };
    assembly->slots = slots;
    assembly->block_rows = block_rows;
    assembly->store = CpuStore::CreateOver(std::move(info), std::move(rows), options);
    return assembly;
  };
}

MultiDeviceStore::AssemblyFactory RowAssemblyOn(const std::vector<Device>& devices,
                                                const StoreOptions& options) {
  const bool gpus =
      std::all_of(devices.begin(), devices.end(), [](const Device& d) { return d.cuda; });
  if (!gpus) {
    return HostRowAssembly(options);
  }
#if EMB_HAVE_CUDA
  const int device = devices.front().index;
  return [device, devices, options](
             const TableInfo& table,
             int64_t block_rows) -> absl::StatusOr<std::unique_ptr<RowAssembly>> {
    RETURN_IF_ERROR(EnablePeerAccess(devices, device, options));
    const int slots = options.inflight_batches;
    TableInfo info = AssemblyInfo(table, slots, block_rows);
    const size_t row_bytes = RowBytes(info.dtype, info.dim);
    const CudaCheck check(device, options.on_device_lost);
    ASSIGN_OR_RETURN(std::unique_ptr<DeviceRows> rows,
                     DeviceRows::CreateStaging(check, options, info.dtype, info.rows, info.dim));
    auto assembly = std::make_unique<RowAssembly>();
    DeviceRows* staging = rows.get();
    assembly->rows_at = [staging, block_rows, row_bytes](int block, int64_t row, int64_t n) {
      return AnswerSpan::OnDevice(staging->row_at(block * block_rows + row),
                                  static_cast<size_t>(n) * row_bytes);
    };
    assembly->slots = slots;
    assembly->block_rows = block_rows;
    assembly->device_bytes = rows->bytes() + GpuStore::BatchBufferBytes(options, table.dim);
    ASSIGN_OR_RETURN(assembly->store,
                     GpuStore::CreateOver(std::move(info), std::move(rows), device, options));
    return assembly;
  };
#else
  return HostRowAssembly(options);  // not reached: ResolveDevices finds no GPU in this build
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
