// Makes the stores for a device's tables, and the memory their answers go into: the one place
// that knows which backends this build has.
#ifndef EMB_SERVICE_STORE_STORE_FACTORY_H_
#define EMB_SERVICE_STORE_STORE_FACTORY_H_

#include <memory>

#include "absl/status/statusor.h"
#include "service/common/host_allocator.h"
#include "service/store/device.h"
#include "service/store/embedding_store.h"
#include "service/store/store_options.h"
#include "service/tables/table_source.h"

namespace emb::service {

// Loads `source` onto `device`. RESOURCE_EXHAUSTED when the table does
// not fit (naming the table, bytes needed and bytes free).
absl::StatusOr<std::unique_ptr<EmbeddingStore>> CreateStore(const TableSource& source,
                                                            const Device& device,
                                                            const StoreOptions& options);

// The host memory that `device` writes answers into fastest, for the device's AnswerBufferPool:
// pinned memory mapped into a GPU's address space (PinnedAnswerMemory); nullptr for the CPU,
// where ordinary memory does.
std::shared_ptr<const HostAllocator> CreateAnswerMemory(const Device& device);

}  // namespace emb::service

#endif  // EMB_SERVICE_STORE_STORE_FACTORY_H_
