#include "service/store/gpu_store.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <optional>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/cuda_status.h"
#include "service/common/log.h"
#include "service/common/status_macros.h"

namespace emb::service {
namespace {

// Bytes of GPU memory the batch buffers of `slots` slots take besides the table.
size_t SlotDeviceBytes(int64_t max_batch_ids, int64_t dim, int slots) {
  const size_t per_slot = static_cast<size_t>(max_batch_ids) *
                          (sizeof(int64_t) + static_cast<size_t>(dim) * sizeof(float));
  return per_slot * static_cast<size_t>(slots);
}

// One table's upload (GpuStore::Load): plan.readers threads take chunks from a cursor in file
// order, each pread()ing into its own two pinned staging buffers in turn and issuing the chunk's
// copy on the one upload stream, between two timing events; before a buffer is read into again,
// its reader waits for its last copy and adds that copy's time. The first failure stops the
// cursor, so that the other readers end after their current chunk. Run() returns once every
// reader has ended and the stream is synchronized, failure or not, so the staging buffers (freed
// with this object) are no longer read by any copy.
class TableUpload {
 public:
  using Clock = std::chrono::steady_clock;

  // The first failure: a CUDA error (`cuda`, `what`) for the store to Check (and so report a lost
  // device), or any other status.
  struct Failure {
    absl::Status status;
    cudaError_t cuda = cudaSuccess;
    const char* what = "";
  };

  // `source`, `d_table` and `stream` must outlive the upload.
  TableUpload(const TableSource& source, const LoadPlan& plan, int device, std::byte* d_table,
              cudaStream_t stream, Clock::time_point start)
      : source_(source),
        plan_(plan),
        device_(device),
        d_table_(d_table),
        stream_(stream),
        start_(start),
        cursor_(plan.chunks),
        readers_(static_cast<size_t>(plan.readers)) {}

  void Run() {
    std::vector<std::thread> threads;
    threads.reserve(readers_.size());
    for (Reader& reader : readers_) {
      try {
        threads.emplace_back([this, &reader] { Read(reader); });
      } catch (const std::system_error& e) {  // the readers already started end and are joined
        Fail(absl::ResourceExhaustedError(absl::StrCat("cannot start a thread to read table '",
                                                       source_.name(), "': ", e.what())));
        break;
      }
    }
    for (std::thread& t : threads) {
      t.join();
    }
    synced_ = cudaStreamSynchronize(stream_);
  }

  Failure failure() const {
    absl::MutexLock lock(&failure_mu_);
    return failure_;
  }
  cudaError_t synced() const { return synced_; }
  // After a Run() without failure: the seconds in which some reader was inside a read.
  double ReadSeconds() const {
    std::vector<std::pair<double, double>> reads;
    for (const Reader& reader : readers_) {
      reads.insert(reads.end(), reader.reads.begin(), reader.reads.end());
    }
    return BusySeconds(std::move(reads));
  }
  // After a Run() without failure: the copies' device time, summed into *seconds.
  cudaError_t CopySeconds(double* seconds) {
    for (Reader& reader : readers_) {
      for (Staging& staging : reader.staging) {
        if (cudaError_t e = staging.CountCopy(); e != cudaSuccess) {
          return e;
        }
        *seconds += staging.copy_seconds;
      }
    }
    return cudaSuccess;
  }

 private:
  struct Staging {
    kernels::PinnedBuffer<std::byte> h_chunk;
    kernels::CudaEvent copy_start, copy_end;  // around the last copy from h_chunk
    bool copying = false;                     // a copy was issued and not yet counted
    double copy_seconds = 0;                  // of the copies counted so far

    // Waits for the last copy from h_chunk, if any, and adds its time.
    cudaError_t CountCopy() {
      if (!copying) {
        return cudaSuccess;
      }
      if (cudaError_t e = cudaEventSynchronize(copy_end.get()); e != cudaSuccess) {
        return e;
      }
      float ms = 0;
      if (cudaError_t e = cudaEventElapsedTime(&ms, copy_start.get(), copy_end.get());
          e != cudaSuccess) {
        return e;
      }
      copy_seconds += ms / 1e3;
      copying = false;
      return cudaSuccess;
    }
  };
  struct Reader {
    Staging staging[kStagingBuffersPerReader];
    std::vector<std::pair<double, double>> reads;  // [start, end) of each read, in seconds
  };

  void Fail(absl::Status status, cudaError_t cuda = cudaSuccess, const char* what = "") {
    cursor_.Stop();
    absl::MutexLock lock(&failure_mu_);
    if (failure_.status.ok() && failure_.cuda == cudaSuccess) {
      failure_ = Failure{std::move(status), cuda, what};
    }
  }
  void FailCuda(cudaError_t e, const char* what) { Fail(absl::OkStatus(), e, what); }

  double Since(Clock::time_point t) const {
    return std::chrono::duration<double>(t - start_).count();
  }

  // One reader thread: the staging buffers are allocated here, so that the first reads start
  // while the other readers still allocate theirs.
  void Read(Reader& reader) {
    if (cudaError_t e = cudaSetDevice(device_); e != cudaSuccess) {
      return FailCuda(e, "cudaSetDevice");
    }
    for (Staging& staging : reader.staging) {
      auto h_chunk = kernels::PinnedBuffer<std::byte>::Allocate(plan_.chunk_bytes);
      auto copy_start = kernels::CudaEvent::Create(/*timing=*/true);
      auto copy_end = kernels::CudaEvent::Create(/*timing=*/true);
      for (const absl::Status* s : {&h_chunk.status(), &copy_start.status(), &copy_end.status()}) {
        if (!s->ok()) {
          return Fail(*s);
        }
      }
      staging.h_chunk = *std::move(h_chunk);
      staging.copy_start = *std::move(copy_start);
      staging.copy_end = *std::move(copy_end);
    }
    for (size_t turn = 0;; ++turn) {
      const std::optional<size_t> chunk = cursor_.Next();
      if (!chunk.has_value()) {
        return;
      }
      Staging& staging = reader.staging[turn % kStagingBuffersPerReader];
      if (cudaError_t e = staging.CountCopy(); e != cudaSuccess) {
        return FailCuda(e, "table upload");
      }
      const size_t offset = plan_.ChunkOffset(*chunk);
      const size_t size = plan_.ChunkSize(*chunk);
      const Clock::time_point read_start = Clock::now();
      if (absl::Status s = source_.Read(offset, absl::MakeSpan(staging.h_chunk.data(), size));
          !s.ok()) {
        return Fail(std::move(s));
      }
      reader.reads.emplace_back(Since(read_start), Since(Clock::now()));
      if (cudaError_t e = IssueCopy(staging, offset, size); e != cudaSuccess) {
        return FailCuda(e, "table upload");
      }
    }
  }

  // Enqueues the copy of staging.h_chunk[0, size) to d_table_ + offset between the staging's
  // timing events. Under issue_mu_, so that no other copy comes between the events.
  cudaError_t IssueCopy(Staging& staging, size_t offset, size_t size) {
    absl::MutexLock lock(&issue_mu_);
    if (cudaError_t e = cudaEventRecord(staging.copy_start.get(), stream_); e != cudaSuccess) {
      return e;
    }
    if (cudaError_t e = cudaMemcpyAsync(d_table_ + offset, staging.h_chunk.data(), size,
                                        cudaMemcpyHostToDevice, stream_);
        e != cudaSuccess) {
      return e;
    }
    staging.copying = true;  // the buffer may be read by the copy from here on
    return cudaEventRecord(staging.copy_end.get(), stream_);
  }

  const TableSource& source_;
  const LoadPlan plan_;
  const int device_;
  std::byte* const d_table_;
  const cudaStream_t stream_;
  const Clock::time_point start_;
  ChunkCursor cursor_;
  std::vector<Reader> readers_;  // each touched only by its thread until Run() returns
  absl::Mutex issue_mu_;
  mutable absl::Mutex failure_mu_;
  Failure failure_ ABSL_GUARDED_BY(failure_mu_);
  cudaError_t synced_ = cudaSuccess;
};

}  // namespace

// Pinned, mapped and portable host memory, allocated and freed with `device` current, so that a
// thread that never used CUDA (a gRPC thread) does not create a context on device 0 for it.
class PinnedAnswerMemory final : public HostAllocator {
 public:
  explicit PinnedAnswerMemory(int device) : device_(device) {}

  void* Allocate(size_t bytes) const override {
    void* p = nullptr;
    if (cudaSetDevice(device_) != cudaSuccess ||
        cudaHostAlloc(&p, bytes, cudaHostAllocMapped | cudaHostAllocPortable) != cudaSuccess) {
      (void)cudaGetLastError();  // not sticky: the pool falls back to ordinary memory
      return nullptr;
    }
    void* device_p = nullptr;
    if (cudaHostGetDevicePointer(&device_p, p, 0) != cudaSuccess) {
      (void)cudaGetLastError();
      (void)cudaFreeHost(p);
      return nullptr;
    }
    absl::MutexLock lock(&mu_);
    blocks_[static_cast<const std::byte*>(p)] = Block{bytes, static_cast<std::byte*>(device_p)};
    return p;
  }
  void Release(void* p) const override {
    {
      absl::MutexLock lock(&mu_);
      blocks_.erase(static_cast<const std::byte*>(p));
    }
    (void)cudaSetDevice(device_);
    (void)cudaFreeHost(p);
  }

  // Where the device writes [p, p + bytes) when that lies inside one block of this allocator, or
  // nullptr. No CUDA call: every batch asks this for each caller's span before its launch. With
  // cudaPointerGetAttributes there (0.2 us in a hot loop on an idle host), the host work before a
  // 786 KB batch's launch averaged 6.7 to 7.4 us in the server on the H200 host, 0.45% of batches
  // over 64 us at 16 callers; without it, 2.9 to 4.3 us and 0.07%
  // (docs/runs/h200_device_view_40_42.md).
  std::byte* DeviceAddress(const std::byte* p, size_t bytes) const {
    absl::ReaderMutexLock lock(&mu_);
    auto it = blocks_.upper_bound(p);
    if (it == blocks_.begin()) {
      return nullptr;
    }
    --it;  // the last block starting at or before p
    const auto offset = static_cast<size_t>(p - it->first);
    return offset <= it->second.bytes && bytes <= it->second.bytes - offset
               ? it->second.device + offset
               : nullptr;
  }

  // The process's allocator for `device`: never destroyed, as the pools holding its blocks.
  static const PinnedAnswerMemory* For(int device) {
    static absl::Mutex mu;
    static auto* allocators = new std::vector<const PinnedAnswerMemory*>;
    absl::MutexLock lock(&mu);
    for (const PinnedAnswerMemory* a : *allocators) {
      if (a->device_ == device) {
        return a;
      }
    }
    allocators->push_back(new PinnedAnswerMemory(device));
    return allocators->back();
  }

 private:
  struct Block {
    size_t bytes;
    std::byte* device;  // the block as the device sees it
  };
  const int device_;
  mutable absl::Mutex mu_;
  // The live blocks by their host address (std::less orders any pointers).
  mutable std::map<const std::byte*, Block> blocks_ ABSL_GUARDED_BY(mu_);
};

const HostAllocator* GpuStore::answer_allocator() const { return answer_memory_; }

absl::Status GpuStore::Check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) {
    return absl::OkStatus();
  }
  absl::Status s = kernels::CudaStatus(e, absl::StrCat(what, " on ", device_name_));
  if (kernels::IsStickyCudaError(e) && options_.on_device_lost) {
    options_.on_device_lost(std::string(s.message()));
  }
  return s;
}

GpuStore::GpuStore(const TableSource& source, int device, const StoreOptions& options)
    : name_(source.name()),
      rows_(source.rows()),
      dim_(source.dim()),
      dtype_(source.dtype()),
      device_(device),
      device_name_(absl::StrCat("cuda:", device)),
      max_batch_ids_(options.max_batch_ids),
      options_(options),
      answer_memory_(PinnedAnswerMemory::For(device)) {}

absl::StatusOr<std::unique_ptr<GpuStore>> GpuStore::Create(const TableSource& source, int device,
                                                           const StoreOptions& options) {
  auto store = std::unique_ptr<GpuStore>(new GpuStore(source, device, options));
  RETURN_IF_ERROR(store->Check(cudaSetDevice(device), "cudaSetDevice"));
  ASSIGN_OR_RETURN(store->tuning_, kernels::GetGatherTuning(device));
  size_t free_bytes = 0;
  size_t total_bytes = 0;
  RETURN_IF_ERROR(store->Check(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo"));
  const size_t need = source.bytes() + SlotDeviceBytes(options.max_batch_ids, source.dim(),
                                                       options.inflight_batches);
  if (need > free_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "table '", source.name(), "' does not fit on ", store->device_name_, ": it needs ", need,
        " bytes (", source.bytes(), " for the rows, the rest for batch buffers) but ", free_bytes,
        " of ", total_bytes, " bytes are free"));
  }
  RETURN_IF_ERROR(store->Load(source));
  RETURN_IF_ERROR(store->MakeSlots(options.inflight_batches));
  // Two completion threads per slot: a slot is free again once its rows are out, while the
  // thread that answered it may still be finishing a call, so that every slot's batch has a
  // thread to wait for it.
  for (int i = 0; i < 2 * options.inflight_batches; ++i) {
    store->completers_.emplace_back([s = store.get()] { s->Complete(); });
  }
  return store;
}

absl::Status GpuStore::Load(const TableSource& source) {
  const auto start = std::chrono::steady_clock::now();
  const LoadPlan plan = PlanLoad(source.bytes(), options_.load_readers, options_.load_chunk_bytes,
                                 std::thread::hardware_concurrency());
  ASSIGN_OR_RETURN(d_table_, kernels::DeviceBuffer<std::byte>::Allocate(source.bytes()));
  ASSIGN_OR_RETURN(kernels::CudaStream stream, kernels::CudaStream::Create());
  source.AdviseSequential();
  TableUpload upload(source, plan, device_, d_table_.data(), stream.get(), start);
  upload.Run();
  // The readers have ended; the copies they issued are done (or the stream is broken).
  if (const TableUpload::Failure f = upload.failure(); !f.status.ok() || f.cuda != cudaSuccess) {
    return f.cuda != cudaSuccess ? Check(f.cuda, f.what) : f.status;
  }
  RETURN_IF_ERROR(Check(upload.synced(), "table upload"));
  double copy_seconds = 0;
  RETURN_IF_ERROR(Check(upload.CopySeconds(&copy_seconds), "cudaEventElapsedTime"));
  load_stats_.bytes = source.bytes();
  load_stats_.readers = plan.readers;
  load_stats_.chunk_bytes = plan.chunk_bytes;
  load_stats_.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  load_stats_.read_seconds = upload.ReadSeconds();
  load_stats_.copy_seconds = copy_seconds;
  LogInfo(LoadSummary(name_, load_stats_));
  return absl::OkStatus();
}

absl::Status GpuStore::MakeSlots(int count) {
  const size_t out_bytes = static_cast<size_t>(max_batch_ids_) * dim_ * sizeof(float);
  for (int i = 0; i < count; ++i) {
    auto slot = std::make_unique<Slot>();
    ASSIGN_OR_RETURN(slot->stream, kernels::CudaStream::Create());
    for (kernels::CudaEvent* e :
         {&slot->start, &slot->copied_in, &slot->gathered, &slot->copied_out}) {
      ASSIGN_OR_RETURN(*e, kernels::CudaEvent::Create(/*timing=*/true));
    }
    // Mapped, so that a small batch's kernel reads its ids and writes its rows here directly.
    constexpr unsigned kMapped = cudaHostAllocMapped | cudaHostAllocPortable;
    ASSIGN_OR_RETURN(slot->h_ids,
                     kernels::PinnedBuffer<int64_t>::Allocate(max_batch_ids_, kMapped));
    ASSIGN_OR_RETURN(slot->d_ids, kernels::DeviceBuffer<int64_t>::Allocate(max_batch_ids_));
    ASSIGN_OR_RETURN(slot->d_out, kernels::DeviceBuffer<std::byte>::Allocate(out_bytes));
    ASSIGN_OR_RETURN(slot->h_out, kernels::PinnedBuffer<std::byte>::Allocate(out_bytes, kMapped));
    RETURN_IF_ERROR(Check(cudaHostGetDevicePointer(reinterpret_cast<void**>(&slot->mapped_ids),
                                                   slot->h_ids.data(), 0),
                          "cudaHostGetDevicePointer"));
    RETURN_IF_ERROR(Check(cudaHostGetDevicePointer(reinterpret_cast<void**>(&slot->mapped_out),
                                                   slot->h_out.data(), 0),
                          "cudaHostGetDevicePointer"));
    slots_.push_back(std::move(slot));
  }
  absl::MutexLock lock(&mu_);
  for (auto& slot : slots_) {
    free_.push_back(slot.get());
  }
  return absl::OkStatus();
}

std::byte* GpuStore::DeviceView(absl::Span<std::byte> out) const {
  if (out.empty() || out.size() < options_.direct_answer_min_bytes) {
    return nullptr;
  }
  return answer_memory_->DeviceAddress(out.data(), out.size());
}

template <typename F>
absl::Status GpuStore::ForEachRun(Slot& slot, RowsOut outs, size_t row_bytes, F&& f) {
  Run run{0, 0, 0, nullptr, nullptr};
  for (size_t i = 0; i < outs.size();) {
    run.bytes = 0;
    run.view = slot.views[i];
    run.host = run.view != nullptr ? outs[i].data() : nullptr;
    do {
      if (run.view == nullptr) {
        slot.staged.push_back(Staged{run.first_byte + run.bytes, outs[i].data(), outs[i].size()});
      }
      run.bytes += outs[i].size();
      ++i;
    } while (run.view == nullptr && i < outs.size() && slot.views[i] == nullptr);
    RETURN_IF_ERROR(f(run));
    run.first_id += run.bytes / row_bytes;
    run.first_byte += run.bytes;
  }
  return absl::OkStatus();
}

absl::Status GpuStore::Enqueue(Slot& slot, absl::Span<const int64_t> ids, DataType out_type,
                               RowsOut outs) {
  cudaStream_t stream = slot.stream.get();
  const size_t row_bytes = static_cast<size_t>(dim_) * ElementSize(out_type);
  std::memcpy(slot.h_ids.data(), ids.data(), ids.size() * sizeof(int64_t));
  RETURN_IF_ERROR(Check(cudaSetDevice(device_), "cudaSetDevice"));
  slot.views.clear();
  slot.staged.clear();
  for (absl::Span<std::byte> out : outs) {
    slot.views.push_back(DeviceView(out));
  }
  RETURN_IF_ERROR(Check(cudaEventRecord(slot.start.get(), stream), "cudaEventRecord"));
  slot.zero_copy = slot.out_bytes <= options_.zero_copy_max_bytes;
  if (slot.zero_copy) {
    // One launch a run: the kernel reads the ids from mapped pinned memory and writes the rows
    // to the caller's pinned answer, or to h_out, so a small batch skips two copies and their
    // launch latency.
    RETURN_IF_ERROR(ForEachRun(slot, outs, row_bytes, [&](const Run& run) {
      return kernels::LaunchGather(
          tuning_, d_table_.data(), dtype_, rows_, dim_, slot.mapped_ids + run.first_id,
          static_cast<int64_t>(run.bytes / row_bytes),
          run.view != nullptr ? run.view : slot.mapped_out + run.first_byte, out_type, stream);
    }));
    return Check(cudaEventRecord(slot.copied_out.get(), stream), "cudaEventRecord");
  }
  RETURN_IF_ERROR(
      Check(cudaMemcpyAsync(slot.d_ids.data(), slot.h_ids.data(), ids.size() * sizeof(int64_t),
                            cudaMemcpyHostToDevice, stream),
            "copy ids to the device"));
  RETURN_IF_ERROR(Check(cudaEventRecord(slot.copied_in.get(), stream), "cudaEventRecord"));
  RETURN_IF_ERROR(kernels::LaunchGather(tuning_, d_table_.data(), dtype_, rows_, dim_,
                                        slot.d_ids.data(), static_cast<int64_t>(ids.size()),
                                        slot.d_out.data(), out_type, stream));
  RETURN_IF_ERROR(Check(cudaEventRecord(slot.gathered.get(), stream), "cudaEventRecord"));
  // One copy a run: into the caller's pinned answer, or into h_out.
  RETURN_IF_ERROR(ForEachRun(slot, outs, row_bytes, [&](const Run& run) {
    return Check(cudaMemcpyAsync(
                     run.host != nullptr ? run.host : slot.h_out.data() + run.first_byte,
                     slot.d_out.data() + run.first_byte, run.bytes, cudaMemcpyDeviceToHost, stream),
                 "copy rows to the host");
  }));
  return Check(cudaEventRecord(slot.copied_out.get(), stream), "cudaEventRecord");
}

void GpuStore::LookUp(absl::Span<const int64_t> ids, DataType out_type, RowsOut outs, Done done) {
  const size_t row_bytes = static_cast<size_t>(dim_) * ElementSize(out_type);
  if (absl::Status s = CheckRowsOut(ids.size(), row_bytes, outs); !s.ok()) {
    done(s, StageTimes{});
    return;
  }
  Slot* slot;
  {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(
        +[](std::vector<Slot*>* free) { return !free->empty(); }, &free_));
    slot = free_.back();
    free_.pop_back();
  }
  slot->out_bytes = ids.size() * row_bytes;
  if (absl::Status s = Enqueue(*slot, ids, out_type, outs); !s.ok()) {
    // Wait out whatever did get enqueued before handing the slot back.
    (void)cudaStreamSynchronize(slot->stream.get());
    Release(slot);
    done(s, StageTimes{});
    return;
  }
  slot->done = std::move(done);
  const auto now = std::chrono::steady_clock::now();
  absl::MutexLock lock(&mu_);
  if (last_batch_start_ != std::chrono::steady_clock::time_point()) {
    mean_batch_gap_ += (absl::FromChrono(now - last_batch_start_) - mean_batch_gap_) / 8;
  }
  last_batch_start_ = now;
  in_flight_.push_back(slot);
  in_flight_size_.store(in_flight_.size(), std::memory_order_release);
}

void GpuStore::Release(Slot* slot) {
  absl::MutexLock lock(&mu_);
  free_.push_back(slot);
}

void GpuStore::Complete() {
  (void)cudaSetDevice(device_);
  bool answered = false;
  for (;;) {
    // A thread that has just answered a batch may poll for the next one instead of sleeping.
    Slot* slot = NextInFlight(/*may_poll=*/answered);
    if (slot == nullptr) {
      return;
    }
    absl::Status s = Check(cudaEventSynchronize(slot->copied_out.get()), "batch");
    StageTimes times;
    if (s.ok() && slot->zero_copy) {
      float ms = 0;
      (void)cudaEventElapsedTime(&ms, slot->start.get(), slot->copied_out.get());
      times.gather = ms / 1e3;  // the copies are inside the kernel
    } else if (s.ok()) {
      float ms[3] = {0, 0, 0};
      (void)cudaEventElapsedTime(&ms[0], slot->start.get(), slot->copied_in.get());
      (void)cudaEventElapsedTime(&ms[1], slot->copied_in.get(), slot->gathered.get());
      (void)cudaEventElapsedTime(&ms[2], slot->gathered.get(), slot->copied_out.get());
      times = StageTimes{ms[0] / 1e3, ms[1] / 1e3, ms[2] / 1e3};
    }
    if (s.ok() && !slot->staged.empty()) {
      const auto copy_start = std::chrono::steady_clock::now();
      for (const Staged& piece : slot->staged) {
        std::memcpy(piece.dst, slot->h_out.data() + piece.offset, piece.bytes);
      }
      times.host_copy =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - copy_start).count();
    }
    // The rows are in the callers' buffers: the slot is free for the next batch while `done`
    // finishes calls (a gRPC send of hundreds of microseconds for a large answer).
    Done done = std::move(slot->done);
    Release(slot);
    done(s, times);
    answered = true;
  }
}

GpuStore::Slot* GpuStore::NextInFlight(bool may_poll) {
  // While a thread polls, a batch that arrives is its to take: waking a sleeper for it is what
  // polling saves. `polling_` changes only under mu_, so that the sleepers' condition below is a
  // function of state mu_ guards, as absl::Condition requires (an atomic read there once broke
  // the Mutex's waiter bookkeeping under load).
  bool poll = false;
  if (may_poll && options_.completion_poll > absl::ZeroDuration()) {
    absl::MutexLock lock(&mu_);
    poll = !polling_ && !stopping_ && in_flight_.empty() &&
           mean_batch_gap_ >= options_.completion_poll_min_gap;
    polling_ = polling_ || poll;
  }
  if (poll) {
    PollForWork();
  }
  absl::MutexLock lock(&mu_);
  if (poll) {
    polling_ = false;  // the unlock below wakes a sleeper for any batch behind the one taken
  }
  mu_.Await(absl::Condition(
      +[](GpuStore* s) ABSL_NO_THREAD_SAFETY_ANALYSIS {
        return s->stopping_ || (!s->in_flight_.empty() && !s->polling_);
      },
      this));
  if (in_flight_.empty()) {
    return nullptr;
  }
  Slot* slot = in_flight_.front();
  in_flight_.pop_front();
  in_flight_size_.store(in_flight_.size(), std::memory_order_release);
  return slot;
}

void GpuStore::PollForWork() const {
  const auto until =
      std::chrono::steady_clock::now() + absl::ToChronoNanoseconds(options_.completion_poll);
  while (in_flight_size_.load(std::memory_order_acquire) == 0 &&
         std::chrono::steady_clock::now() < until) {
#if defined(__x86_64__)
    __builtin_ia32_pause();
#endif
  }
}

GpuStore::~GpuStore() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  for (std::thread& t : completers_) {
    t.join();
  }
}

}  // namespace emb::service
