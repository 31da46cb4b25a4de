// GpuStore: a table resident in GPU memory; each LookUp is one batch through a pool of slots.
//
// A slot owns a stream, pinned host buffers and device buffers sized at start-up for
// max_batch_ids ids, so the request path allocates nothing. LookUp takes a free slot (blocking
// while all are busy: the batcher's back-pressure), copies the ids into pinned memory and
// enqueues copy-in, gather and copy-out on the slot's stream (or, for a small batch, gathers that
// read the ids from mapped pinned memory and write the rows to host memory directly). Rows go
// straight into each caller's span where it is pinned (answer_allocator()'s memory) and large
// enough to be worth its own copy or launch; the other spans' rows pass through the slot's pinned
// buffer and are copied on the host. Completion threads, two per slot, wait for the batches, free
// their slots and call `done`, so several batches are answered at once. With several slots the
// copies and gather of one batch overlap the next. A completion thread that has just answered polls
// briefly for the next batch instead of sleeping, since waking a thread costs more than a small
// batch's whole gather; it does so only while batches come sparsely, since under a steady stream
// the spinning core costs more than the wake-ups. Thread-safe.
#ifndef EMB_SERVICE_STORE_GPU_STORE_H_
#define EMB_SERVICE_STORE_GPU_STORE_H_

#include <cuda_runtime_api.h>

#include <atomic>
#include <chrono>
#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "kernels/cuda_stream.h"
#include "kernels/device_buffer.h"
#include "kernels/embedding_lookup.h"
#include "service/store/embedding_store.h"
#include "service/store/load_plan.h"
#include "service/store/store_options.h"
#include "service/tables/table_source.h"

namespace emb::service {

class PinnedAnswerMemory;  // gpu_store.cc: the answer allocator, one per device

class GpuStore final : public EmbeddingStore {
 public:
  // Copies the table onto GPU `device`: options.load_readers threads read chunks of
  // options.load_chunk_bytes into pinned staging buffers (two each, at most 1 GiB in all) while
  // the copies of the chunks already read run on one stream; logs the upload's rates (see
  // LoadSummary). RESOURCE_EXHAUSTED (table, bytes needed, bytes free) when it does not fit;
  // INTERNAL with the CUDA error's name for other CUDA failures, or naming the file and offset of
  // a failed read. Every reader thread has ended when Create returns.
  static absl::StatusOr<std::unique_ptr<GpuStore>> Create(const TableSource& source, int device,
                                                          const StoreOptions& options);
  // Waits for the batches in flight, then stops the completion threads.
  ~GpuStore() override;

  const std::string& name() const override { return name_; }
  int64_t rows() const override { return rows_; }
  int64_t dim() const override { return dim_; }
  DataType dtype() const override { return dtype_; }
  const std::string& device() const override { return device_name_; }
  int64_t max_batch_ids() const override { return max_batch_ids_; }
  bool asynchronous() const override { return true; }
  int max_inflight_batches() const override { return static_cast<int>(slots_.size()); }
  // Pinned host memory, mapped into every device's address space (cudaHostAlloc); one allocator
  // per device, for the life of the process.
  const HostAllocator* answer_allocator() const override;
  // How the table's upload at Create went.
  const LoadStats& load_stats() const { return load_stats_; }

  void LookUp(absl::Span<const int64_t> ids, DataType out_type, RowsOut outs, Done done) override;

 private:
  // Rows that reach a caller's span through the slot's pinned buffer: a host copy once the batch
  // is done.
  struct Staged {
    size_t offset;  // in h_out
    std::byte* dst;
    size_t bytes;
  };
  struct Slot {
    kernels::CudaStream stream;
    kernels::CudaEvent start, copied_in, gathered, copied_out;
    kernels::PinnedBuffer<int64_t> h_ids;
    kernels::DeviceBuffer<int64_t> d_ids;
    kernels::DeviceBuffer<std::byte> d_out;
    kernels::PinnedBuffer<std::byte> h_out;
    int64_t* mapped_ids = nullptr;    // h_ids as the device sees it
    std::byte* mapped_out = nullptr;  // h_out as the device sees it
    // Set while the slot holds a batch.
    size_t out_bytes = 0;
    bool zero_copy = false;
    std::vector<std::byte*> views;  // per span: where the device writes it; nullptr: staged
    std::vector<Staged> staged;
    Done done;
  };

  GpuStore(const TableSource& source, int device, const StoreOptions& options);
  // Fills d_table_ from `source` and sets load_stats_; see Create.
  absl::Status Load(const TableSource& source);
  absl::Status MakeSlots(int count);
  // Enqueues the batch on `slot`; an error means nothing is left in flight on it.
  absl::Status Enqueue(Slot& slot, absl::Span<const int64_t> ids, DataType out_type, RowsOut outs);
  // Where the device may write `out` directly (its address in the device's view of pinned
  // memory), or nullptr: not inside one block of answer_allocator(), or under
  // options_.direct_answer_min_bytes.
  std::byte* DeviceView(absl::Span<std::byte> out) const;
  // Where one run of a batch's answer goes: a caller's span that the device writes directly
  // (host and view set), or consecutive staged spans, whose rows go to the slot's pinned buffer
  // at first_byte (both nullptr).
  struct Run {
    size_t first_id;    // in the batch's ids
    size_t first_byte;  // in the batch's answer
    size_t bytes;
    std::byte* host;  // the caller's span
    std::byte* view;  // the same memory as the device sees it
  };
  // Calls f(run) for each run of `outs` in order, from slot.views; records the staged spans in
  // slot.staged.
  template <typename F>
  static absl::Status ForEachRun(Slot& slot, RowsOut outs, size_t row_bytes, F&& f);
  void Complete();
  // The next batch in flight, in enqueue order; nullptr once stopping with none left. With
  // `may_poll`, and no other thread polling, polls (see PollForWork) before it sleeps.
  Slot* NextInFlight(bool may_poll);
  // Spins, without mu_, until a batch is in flight or options_.completion_poll has passed.
  void PollForWork() const;
  void Release(Slot* slot);
  // A sticky error ends the process through on_device_lost; other errors are returned.
  absl::Status Check(cudaError_t e, const char* what);

  const std::string name_;
  const int64_t rows_;
  const int64_t dim_;
  const DataType dtype_;
  const int device_;
  const std::string device_name_;
  const int64_t max_batch_ids_;
  const StoreOptions options_;
  const PinnedAnswerMemory* const answer_memory_;  // PinnedAnswerMemory::For(device_)
  kernels::GatherTuning tuning_;
  kernels::DeviceBuffer<std::byte> d_table_;
  LoadStats load_stats_;
  std::vector<std::unique_ptr<Slot>> slots_;

  absl::Mutex mu_;
  std::vector<Slot*> free_ ABSL_GUARDED_BY(mu_);
  std::deque<Slot*> in_flight_ ABSL_GUARDED_BY(mu_);  // in enqueue order
  std::atomic<size_t> in_flight_size_{0};             // in_flight_.size(), read without mu_
  // A completion thread is polling for the next batch; sleepers leave new batches to it.
  bool polling_ ABSL_GUARDED_BY(mu_) = false;
  // When the last batch started, and the moving mean of the time between batch starts (from a
  // second, so that a new store polls); see StoreOptions::completion_poll_min_gap.
  std::chrono::steady_clock::time_point last_batch_start_ ABSL_GUARDED_BY(mu_);
  absl::Duration mean_batch_gap_ ABSL_GUARDED_BY(mu_) = absl::Seconds(1);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> completers_;
};

}  // namespace emb::service

#endif  // EMB_SERVICE_STORE_GPU_STORE_H_
