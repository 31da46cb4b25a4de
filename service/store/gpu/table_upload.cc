#include "service/store/gpu/table_upload.h"

#include <cuda_runtime_api.h>

#include <optional>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "kernels/cuda_stream.h"
#include "kernels/device_buffer.h"
#include "service/common/status_macros.h"

namespace emb::service {
namespace {

// One table's upload (UploadTable): plan.readers threads take chunks from a cursor in file
// order, each pread()ing into its own two pinned staging buffers in turn and issuing the chunk's
// copy on the one upload stream, between two timing events; before a buffer is read into again,
// its reader waits for its last copy and adds that copy's time. The first failure stops the
// cursor, so that the other readers end after their current chunk. Run() returns once every
// reader has ended and the stream is synchronized, failure or not, so the staging buffers (freed
// with this object) are no longer read by any copy.
class TableUpload {
 public:
  // The first failure: a CUDA error (`cuda`, `what`) for the store to Check (and so report a lost
  // device), or any other status.
  struct Failure {
    absl::Status status;
    cudaError_t cuda = cudaSuccess;
    const char* what = "";
  };

  // `source`, `d_table` and `stream` must outlive the upload.
  TableUpload(const TableSource& source, const LoadPlan& plan, int device, std::byte* d_table,
              cudaStream_t stream, Clock* clock)
      : source_(source),
        plan_(plan),
        device_(device),
        d_table_(d_table),
        stream_(stream),
        clock_(clock),
        start_(clock->Now()),
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

  double Since(absl::Time t) const { return absl::ToDoubleSeconds(t - start_); }

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
      const absl::Time read_start = clock_->Now();
      if (absl::Status s = source_.Read(offset, absl::MakeSpan(staging.h_chunk.data(), size));
          !s.ok()) {
        return Fail(std::move(s));
      }
      reader.reads.emplace_back(Since(read_start), Since(clock_->Now()));
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
  Clock* const clock_;
  const absl::Time start_;
  ChunkCursor cursor_;
  std::vector<Reader> readers_;  // each touched only by its thread until Run() returns
  absl::Mutex issue_mu_;
  mutable absl::Mutex failure_mu_;
  Failure failure_ ABSL_GUARDED_BY(failure_mu_);
  cudaError_t synced_ = cudaSuccess;
};

}  // namespace

absl::StatusOr<LoadStats> UploadTable(const TableSource& source, const LoadPlan& plan,
                                      std::byte* d_table, const CudaCheck& check, Clock* clock) {
  ASSIGN_OR_RETURN(kernels::CudaStream stream, kernels::CudaStream::Create());
  source.AdviseSequential();
  TableUpload upload(source, plan, check.device(), d_table, stream.get(), clock);
  upload.Run();
  // The readers have ended; the copies they issued are done (or the stream is broken).
  if (const TableUpload::Failure f = upload.failure(); !f.status.ok() || f.cuda != cudaSuccess) {
    return f.cuda != cudaSuccess ? check(f.cuda, f.what) : f.status;
  }
  RETURN_IF_ERROR(check(upload.synced(), "table upload"));
  LoadStats stats;
  RETURN_IF_ERROR(check(upload.CopySeconds(&stats.copy_seconds), "cudaEventElapsedTime"));
  stats.bytes = source.bytes();
  stats.readers = plan.readers;
  stats.chunk_bytes = plan.chunk_bytes;
  stats.read_seconds = upload.ReadSeconds();
  return stats;
}

}  // namespace emb::service
