// Chooses the device for the tables and makes the store for each: the one place that knows which
// backends this build has.
#ifndef EMB_SERVICE_STORE_FACTORY_H_
#define EMB_SERVICE_STORE_FACTORY_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "service/embedding_store.h"
#include "service/table_source.h"

namespace emb::service {

struct StoreOptions {
  int64_t max_batch_ids = 65536;
  int inflight_batches = 4;
  // GPU: how long a completion thread that has just answered a batch keeps polling for the next
  // one before it sleeps (one thread polls at a time). Polling spares a thread wake-up per batch,
  // tens of microseconds in a VM, for up to one busy core while requests keep coming.
  absl::Duration completion_poll = absl::Microseconds(500);
  // GPU: batches whose answer is at most this many bytes are gathered straight from and into
  // mapped pinned memory (one launch, no copies); larger ones copy ids in and rows out with the
  // copy engines.
  size_t zero_copy_max_bytes = 1 << 20;
  // Called (once, from a store thread) when the device is lost; must not return.
  std::function<void(const std::string& why)> on_device_lost;
};

// "auto" -> "cuda:0" where this build has CUDA and a GPU is visible, else "cpu"; "cuda" ->
// "cuda:0"; "cpu" and "cuda:N" as they are. INVALID_ARGUMENT for anything else, or for cuda when
// this build has no CUDA backend or the device does not exist.
absl::StatusOr<std::string> ResolveDevice(const std::string& flag);

// Loads `source` onto `device` (a ResolveDevice() result). RESOURCE_EXHAUSTED when the table does
// not fit (naming the table, bytes needed and bytes free).
absl::StatusOr<std::unique_ptr<EmbeddingStore>> CreateStore(const TableSource& source,
                                                            const std::string& device,
                                                            const StoreOptions& options);

}  // namespace emb::service

#endif  // EMB_SERVICE_STORE_FACTORY_H_
