// LoadTableVersion: serves another version of a table from its version directory while the table
// serves (EmbeddingAdminService.LoadVersion, and the server's polling for new versions): the
// version is opened and checked, loaded beside the served one (EmbeddingStore::PrepareTable), then
// swapped in at a batch boundary through the table's batcher. Thread-safe; blocks for the load.
#ifndef EMB_SERVICE_RPC_VERSION_LOADER_H_
#define EMB_SERVICE_RPC_VERSION_LOADER_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "service/common/clock.h"
#include "service/rpc/embedding_service.h"

namespace emb::service {

struct LoadedVersion {
  int64_t version = 0;
  int64_t sequence = 0;
  bool changed = false;  // false: `version` was already served, nothing was loaded
};

// Serves version `version` of `table` (0: the newest there). `pin` marks the table pinned (or,
// false, unpinned) once it serves the version. FAILED_PRECONDITION when the table has no version
// directory, or the version is missing, broken, of another shape, or does not fit beside the
// served one; ABORTED when a save or load of the table is running. On any error the served
// version stays. Counts embedding_table_version_loads_total and logs the outcome.
absl::StatusOr<LoadedVersion> LoadTableVersion(ServedTable& table, int64_t version, bool pin,
                                               Clock* clock);

}  // namespace emb::service

#endif  // EMB_SERVICE_RPC_VERSION_LOADER_H_
