// EmbeddingStore: one table resident on one device, and the gather over it.
//
// The service reaches every backend through this interface: CpuStore (always built) and GpuStore
// (where CUDA is found) implement it. Thread-safe. LookUp may block while the device is busy
// (that is the batcher's back-pressure); it is called from batcher threads and, for an
// asynchronous store whose batcher is idle, from the gRPC thread that brought the request.
#ifndef EMB_SERVICE_STORE_EMBEDDING_STORE_H_
#define EMB_SERVICE_STORE_EMBEDDING_STORE_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/types/span.h"
#include "kernels/data_type.h"

namespace emb::service {

// How long the stages of one batch took, in seconds; 0 where the device has no such stage.
struct StageTimes {
  double copy_in = 0;
  double gather = 0;
  double copy_out = 0;
};

class EmbeddingStore {
 public:
  // Called exactly once per LookUp, on some store or batcher thread. `rows` holds
  // ids.size() * dim() elements of the requested type and is valid only during the call.
  using Done = absl::AnyInvocable<void(const absl::Status& status, absl::Span<const std::byte> rows,
                                       const StageTimes& times)>;

  virtual ~EmbeddingStore() = default;

  virtual const std::string& name() const = 0;
  virtual int64_t rows() const = 0;
  virtual int64_t dim() const = 0;
  virtual DataType dtype() const = 0;
  // "cpu" or "cuda:N".
  virtual const std::string& device() const = 0;
  // Bytes the table occupies on its device.
  virtual size_t bytes() const {
    return static_cast<size_t>(rows()) * dim() * ElementSize(dtype());
  }
  // The most ids one LookUp may carry (the size the store's buffers were made for).
  virtual int64_t max_batch_ids() const = 0;
  // True where LookUp only enqueues the gather and `done` runs later on a store thread (GpuStore),
  // so that calling LookUp never waits for a gather; false where LookUp does the gather before it
  // returns (CpuStore).
  virtual bool asynchronous() const { return false; }

  // Gathers rows ids[i], converted to `out_type`. Ids were checked by the caller (all in
  // [0, rows())) and number at most max_batch_ids(); `ids` must stay valid until `done` runs.
  // Errors: INTERNAL with the CUDA error's name for a device failure.
  virtual void LookUp(absl::Span<const int64_t> ids, DataType out_type, Done done) = 0;
};

}  // namespace emb::service

#endif  // EMB_SERVICE_STORE_EMBEDDING_STORE_H_
