// BatchSlot and SlotPool: what one batch in flight on a GpuStore owns, and the store's fixed set
// of them.
//
// A slot owns a stream, four timing events, and pinned host and device buffers sized at start-up
// for max_batch_ids ids, as many answer rows in float32 (the widest answer type) and as many bags
// (SlotBagsBytes), so that the request path allocates nothing. The host buffers are mapped: a small
// batch's kernel reads its ids from h_ids and writes rows to h_out directly.
//
// Ownership: the SlotPool owns every slot for the store's life. A slot belongs to whoever took it
// with Acquire(): the LookUp thread while it enqueues the batch, then (through the store's
// BatchCompleter) the completion thread that waits for it, which calls Release() once the rows
// are in the callers' buffers. Only that owner touches the slot's per-batch fields. SlotPool is
// thread-safe.
#ifndef EMB_SERVICE_STORE_GPU_BATCH_SLOTS_H_
#define EMB_SERVICE_STORE_GPU_BATCH_SLOTS_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "kernels/cuda_stream.h"
#include "kernels/device_buffer.h"
#include "service/store/embedding_store.h"
#include "service/store/gpu/cuda_check.h"

namespace emb::service {

struct BatchSlot {
  // Rows that reach a caller's span through h_out: a host copy once the batch is done.
  struct Staged {
    size_t offset;  // in h_out
    std::byte* dst;
    size_t bytes;
  };

  kernels::CudaStream stream;
  // Around the stages: start | copy in | gathered | copied out (a zero-copy batch records only
  // start and copied_out).
  kernels::CudaEvent start, copied_in, gathered, copied_out;
  kernels::PinnedBuffer<int64_t> h_ids;
  kernels::DeviceBuffer<int64_t> d_ids;
  kernels::DeviceBuffer<std::byte> d_out;
  kernels::PinnedBuffer<std::byte> h_out;
  // A pooled batch's bags (offsets, weights, scales), packed, and their device copy.
  kernels::PinnedBuffer<std::byte> h_bags;
  kernels::DeviceBuffer<std::byte> d_bags;
  int64_t* mapped_ids = nullptr;    // h_ids as the device sees it
  std::byte* mapped_out = nullptr;  // h_out as the device sees it

  // The batch the slot holds, set by its owner.
  bool zero_copy = false;  // gathered from and into mapped memory, no copies
  std::vector<Staged> staged;
  EmbeddingStore::Done done;
};

// Bytes of a slot's bag buffers for `max_batch_ids` ids and bags: offsets, weights and scales.
size_t SlotBagsBytes(int64_t max_batch_ids);

class SlotPool {
 public:
  // `count` slots on check.device() (current on the calling thread), each for `max_batch_ids`
  // ids and `max_out_bytes` bytes of rows. INTERNAL (through `check`) when CUDA cannot make them.
  static absl::StatusOr<std::unique_ptr<SlotPool>> Create(int count, int64_t max_batch_ids,
                                                          size_t max_out_bytes,
                                                          const CudaCheck& check);

  int size() const { return static_cast<int>(slots_.size()); }
  // A free slot; blocks while every slot holds a batch (the batcher's back-pressure).
  BatchSlot* Acquire();
  // Hands `slot` back; its batch must be done with its buffers.
  void Release(BatchSlot* slot);

 private:
  SlotPool() = default;

  std::vector<std::unique_ptr<BatchSlot>> slots_;
  absl::Mutex mu_;
  std::vector<BatchSlot*> free_ ABSL_GUARDED_BY(mu_);
};

}  // namespace emb::service

#endif  // EMB_SERVICE_STORE_GPU_BATCH_SLOTS_H_
