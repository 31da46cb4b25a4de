// Makes the store for a table on its device: the one place that knows which backends this build
// has.
#ifndef EMB_SERVICE_STORE_STORE_FACTORY_H_
#define EMB_SERVICE_STORE_STORE_FACTORY_H_

#include <memory>

#include "absl/status/statusor.h"
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

}  // namespace emb::service

#endif  // EMB_SERVICE_STORE_STORE_FACTORY_H_
