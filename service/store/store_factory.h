// Makes the stores for a device's tables, and the memory their answers go into: the one place
// that knows which backends this build has.
#ifndef EMB_SERVICE_STORE_STORE_FACTORY_H_
#define EMB_SERVICE_STORE_STORE_FACTORY_H_

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "service/common/host_allocator.h"
#include "service/store/device.h"
#include "service/store/embedding_store.h"
#include "service/store/multi_device_store.h"
#include "service/store/store_options.h"
#include "service/tables/table_source.h"

namespace emb::service {

// Loads `source` onto `device`. RESOURCE_EXHAUSTED when the table does
// not fit (naming the table, bytes needed and bytes free).
absl::StatusOr<std::unique_ptr<EmbeddingStore>> CreateStore(const TableSource& source,
                                                            const Device& device,
                                                            const StoreOptions& options);

// How the answers of a table split by rows over `devices` (MultiDeviceStore) are put together:
// in staging rows on the first device, by a GpuStore over them (DeviceRows::CreateStaging), where
// every device is a GPU; else as HostRowAssembly.
MultiDeviceStore::AssemblyFactory RowAssemblyOn(const std::vector<Device>& devices,
                                                const StoreOptions& options);
// In staging rows in host memory, by a CpuStore over them (the parts' rows copied there; on a GPU
// part through its pinned buffer).
MultiDeviceStore::AssemblyFactory HostRowAssembly(const StoreOptions& options);

// The host memory that `device` writes answers into fastest, for the device's AnswerBufferPool:
// pinned memory mapped into a GPU's address space (PinnedAnswerMemory); nullptr for the CPU,
// where ordinary memory does.
std::shared_ptr<const HostAllocator> CreateAnswerMemory(const Device& device);

}  // namespace emb::service

#endif  // EMB_SERVICE_STORE_STORE_FACTORY_H_
