// mapped_read_probe: how fast a kernel reads random rows of host memory that the GPU maps (a
// host tier's misses, docs/benchmarks.md section 14), by how the memory was made, against the
// same reads from GPU memory. Each case fills --gib of host memory (the first fill of the
// machine's memory is timed apart: a microVM's memory grows as it is first touched), pins and maps
// it, then times batches of --ids uniformly random rows of --row_bytes bytes, read by a kernel
// whose groups of lanes each load --rows_in_flight rows before they use any (as the bag kernel's
// GatherKernel does), over the whole span and over its first --small_mib (where the GPU's and the
// IOMMU's address translations fit in their caches).
//
//   mapped_read_probe [--gib=16] [--row_bytes=512] [--ids=65536] [--batches=20]
//                     [--small_mib=256] [--file=/tmp/mapped_read_probe.bin]
//   mapped_read_probe --touch_gib=N
//   mapped_read_probe --ids_sweep=1000,7537,65536 [--gib=16]
//   mapped_read_probe --host_gather=6800,65536 [--gather_threads=1,4,8] [--gib=16]
//
// --touch_gib=N only fills N GiB of anonymous memory with every hardware thread, twice, prints
// both times and exits: on a microVM whose memory grows as it is first touched, what a later
// program's fresh memory then costs where the machine's memory has already grown.
//
// --ids_sweep=N,... only times batches of each of those many rows over the whole span of the
// host tier's kind of memory, and prints a table: whether a few misses (a host tier's, with most
// of a batch served by its cache) come faster a row than a batch of misses only, that is, whether
// the rows' reads are bound by their latency or by a rate.
//
// --host_gather=N,... times the other way to serve N misses: host threads copy the random rows
// into pinned staging memory (each thread its share of the rows, then its own cudaMemcpyAsync of
// that share), beside a kernel reading a share of them through the mapping at the same time; for
// each count of --gather_threads and each share the host takes (0, 1/4, 1/2, 3/4, all), the
// median batch time. Whether copies of contiguous staging memory, which the IOMMU translates a
// page at a time, beat a kernel's random mapped reads, which it translates a row at a time.
//
// Cases: anonymous memory with transparent huge pages (HugePageRows, what the host tier uses);
// anonymous memory with 4 KiB pages (MADV_NOHUGEPAGE); cudaHostAlloc's own pinned memory; and a
// file's page-cache pages mapped read-only and registered in place (cudaHostRegisterReadOnly: no
// copy of the file). Prints one markdown table.
#include <cuda_runtime.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "bench/common/bench_flags.h"
#include "bench/common/seconds_since.h"
#include "kernels/cuda_status.h"
#include "kernels/cuda_stream.h"
#include "kernels/device_buffer.h"
#include "service/common/status_macros.h"
#include "service/tables/host_rows.h"

namespace {

using emb::bench::Clock;
using emb::bench::SecondsSince;

using emb::kernels::CudaStatus;

// Each group of `lanes` lanes loads kRows rows (16 bytes a lane of each) before it sums any, and
// writes one sum per lane (so that no load is dropped).
template <int kRows>
__global__ void ReadRows(const uint8_t* base, size_t row_bytes, const int64_t* ids, int64_t n,
                         int lanes, uint4* out) {
  const int64_t thread = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t group = thread / lanes;
  const int lane = static_cast<int>(thread % lanes);
  const int64_t first = group * kRows;
  if (first >= n) {
    return;
  }
  uint4 v[kRows];
#pragma unroll
  for (int u = 0; u < kRows; ++u) {
    const int64_t id = first + u < n ? ids[first + u] : ids[first];
    v[u] = __ldg(reinterpret_cast<const uint4*>(base + static_cast<size_t>(id) * row_bytes) + lane);
  }
  uint4 s = v[0];
#pragma unroll
  for (int u = 1; u < kRows; ++u) {
    s.x ^= v[u].x;
    s.y ^= v[u].y;
    s.z ^= v[u].z;
    s.w ^= v[u].w;
  }
  out[thread] = s;
}

// Fills `bytes` at `p` with `threads` threads (first touch where the memory is new).
void Fill(uint8_t* p, size_t bytes, unsigned threads) {
  std::vector<std::thread> workers;
  workers.reserve(threads);
  const size_t part = (bytes / threads + 4095) / 4096 * 4096;
  for (unsigned t = 0; t < threads; ++t) {
    workers.emplace_back([=] {
      const size_t begin = std::min(bytes, t * part);
      const size_t end = std::min(bytes, begin + part);
      std::memset(p + begin, static_cast<int>(t + 1), end - begin);
    });
  }
  for (auto& w : workers) {
    w.join();
  }
}

struct Reads {
  double gbps = 0;    // row bytes read a second, median batch
  double p50_us = 0;  // median batch
};

// Times `batches` batches of random rows over the first `span_rows` rows at `device_base`.
absl::StatusOr<Reads> TimeReads(const uint8_t* device_base, size_t row_bytes, int64_t span_rows,
                                int64_t ids_per_batch, int batches, std::mt19937_64& rng) {
  constexpr int kRows = 8;
  const int lanes = static_cast<int>(row_bytes / 16);
  std::uniform_int_distribution<int64_t> pick(0, span_rows - 1);
  std::vector<int64_t> ids(static_cast<size_t>(ids_per_batch) * batches);
  for (int64_t& id : ids) {
    id = pick(rng);
  }
  const int64_t threads = (ids_per_batch + kRows - 1) / kRows * lanes;
  ASSIGN_OR_RETURN(auto d_ids, emb::kernels::DeviceBuffer<int64_t>::Allocate(ids.size()));
  ASSIGN_OR_RETURN(auto d_out,
                   emb::kernels::DeviceBuffer<uint4>::Allocate(static_cast<size_t>(threads)));
  absl::Status s = CudaStatus(
      cudaMemcpy(d_ids.data(), ids.data(), ids.size() * sizeof(int64_t), cudaMemcpyHostToDevice),
      "cudaMemcpy");
  std::vector<float> ms;
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  const auto blocks = static_cast<unsigned>((threads + 255) / 256);
  for (int b = -1; s.ok() && b < batches; ++b) {  // batch -1: a warm-up on batch 0's ids
    const int64_t* batch_ids = d_ids.data() + static_cast<int64_t>(std::max(b, 0)) * ids_per_batch;
    cudaEventRecord(start);
    ReadRows<kRows>
        <<<blocks, 256>>>(device_base, row_bytes, batch_ids, ids_per_batch, lanes, d_out.data());
    cudaEventRecord(stop);
    s.Update(CudaStatus(cudaEventSynchronize(stop), "kernel"));
    float t = 0;
    cudaEventElapsedTime(&t, start, stop);
    if (b >= 0) ms.push_back(t);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  if (!s.ok()) return s;
  std::sort(ms.begin(), ms.end());
  const double p50 = ms[ms.size() / 2] / 1e3;
  return Reads{static_cast<double>(ids_per_batch) * row_bytes / p50 / 1e9, p50 * 1e6};
}

// A comma-separated list of counts (each at least 1), as `flag` takes it.
absl::StatusOr<std::vector<int64_t>> ParseCounts(const std::string& list, const char* flag) {
  std::vector<int64_t> out;
  for (absl::string_view n : absl::StrSplit(list, ',')) {
    int64_t v = 0;
    if (!absl::SimpleAtoi(n, &v) || v < 1) {
      return absl::InvalidArgumentError(absl::StrCat(flag, ": not a count: ", n));
    }
    out.push_back(v);
  }
  return out;
}

// `bytes` of huge-page host memory as the host tier allocates it, filled with `threads` threads,
// pinned and mapped for the GPU; unpinned when destroyed.
class MappedHostRows {
 public:
  static absl::StatusOr<std::unique_ptr<MappedHostRows>> Create(size_t bytes, unsigned threads) {
    ASSIGN_OR_RETURN(auto memory, emb::service::HugePageRows::Allocate(bytes, "the probe"));
    auto* host = reinterpret_cast<uint8_t*>(memory->mutable_data());
    Fill(host, bytes, threads);
    RETURN_IF_ERROR(
        CudaStatus(cudaHostRegister(host, bytes, cudaHostRegisterMapped | cudaHostRegisterPortable),
                   "cudaHostRegister"));
    auto rows = std::unique_ptr<MappedHostRows>(new MappedHostRows(std::move(memory)));
    void* device = nullptr;
    RETURN_IF_ERROR(
        CudaStatus(cudaHostGetDevicePointer(&device, host, 0), "cudaHostGetDevicePointer"));
    rows->device_ = static_cast<const uint8_t*>(device);
    return rows;
  }
  ~MappedHostRows() { cudaHostUnregister(host()); }

  uint8_t* host() { return reinterpret_cast<uint8_t*>(memory_->mutable_data()); }
  const uint8_t* device() const { return device_; }  // the same memory as the GPU addresses it

 private:
  explicit MappedHostRows(std::unique_ptr<emb::service::HugePageRows> memory)
      : memory_(std::move(memory)) {}
  std::unique_ptr<emb::service::HugePageRows> memory_;
  const uint8_t* device_ = nullptr;
};

// --ids_sweep: batches of each size in `sizes` (a comma-separated list) over `bytes` of huge-page
// host memory, as the host tier allocates and maps it.
absl::Status SweepIds(const std::string& sizes, size_t bytes, int64_t row_bytes, int batches,
                      unsigned threads, std::mt19937_64& rng) {
  ASSIGN_OR_RETURN(const std::vector<int64_t> counts, ParseCounts(sizes, "--ids_sweep"));
  ASSIGN_OR_RETURN(const std::unique_ptr<MappedHostRows> rows,
                   MappedHostRows::Create(bytes, threads));
  std::printf(
      "Random rows of %lld bytes over %zu GiB of huge-page host memory (median of %d "
      "batches)\n\n| rows a batch | us | Mrows/s | GB/s |\n| ---: | ---: | ---: | ---: |\n",
      static_cast<long long>(row_bytes), bytes >> 30, batches);
  for (const int64_t n : counts) {
    ASSIGN_OR_RETURN(const Reads r,
                     TimeReads(rows->device(), row_bytes, static_cast<int64_t>(bytes / row_bytes),
                               n, batches, rng));
    std::printf("| %lld | %.1f | %.1f | %.1f |\n", static_cast<long long>(n), r.p50_us,
                static_cast<double>(n) / r.p50_us, r.gbps);
  }
  return absl::OkStatus();
}

// Runs a function on `n` threads at once (the caller is thread 0) and returns when all are done.
// The workers spin between runs: the probe times the copies, not a pool's wake-up.
class SpinPool {
 public:
  explicit SpinPool(int n) : n_(n) {
    for (int t = 1; t < n; ++t) workers_.emplace_back([this, t] { Loop(t); });
  }
  ~SpinPool() {
    stop_.store(true);
    generation_.fetch_add(1, std::memory_order_release);
    for (std::thread& w : workers_) w.join();
  }
  void Run(const std::function<void(int)>& fn) {
    fn_ = &fn;
    done_.store(0, std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
    fn(0);
    while (done_.load(std::memory_order_acquire) < n_ - 1) {
    }
  }

 private:
  void Loop(int t) {
    uint64_t seen = 0;
    for (;;) {
      uint64_t g;
      while ((g = generation_.load(std::memory_order_acquire)) == seen) {
      }
      seen = g;
      if (stop_.load()) return;
      (*fn_)(t);
      done_.fetch_add(1, std::memory_order_release);
    }
  }
  const int n_;
  std::vector<std::thread> workers_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> done_{0};
  std::atomic<bool> stop_{false};
  const std::function<void(int)>* fn_ = nullptr;
};

// --host_gather: batches of each size in `sizes`, a share of each batch's rows read by the kernel
// through the mapping while host threads copy the rest into pinned staging memory and on to the
// GPU. Prints the median batch time (wall clock, launch to both done) for each thread count and
// share.
absl::Status SweepHostGather(const std::string& sizes, const std::string& thread_counts,
                             size_t bytes, int64_t row_bytes, int batches, unsigned fill_threads,
                             std::mt19937_64& rng) {
  ASSIGN_OR_RETURN(const std::vector<int64_t> counts, ParseCounts(sizes, "--host_gather"));
  ASSIGN_OR_RETURN(const std::vector<int64_t> threads_list,
                   ParseCounts(thread_counts, "--gather_threads"));
  const int64_t max_n = *std::max_element(counts.begin(), counts.end());
  const int max_threads =
      static_cast<int>(*std::max_element(threads_list.begin(), threads_list.end()));
  ASSIGN_OR_RETURN(const std::unique_ptr<MappedHostRows> rows,
                   MappedHostRows::Create(bytes, fill_threads));
  uint8_t* host = rows->host();
  const size_t staging_bytes = static_cast<size_t>(max_n) * row_bytes;
  ASSIGN_OR_RETURN(auto staging, emb::kernels::PinnedBuffer<uint8_t>::Allocate(staging_bytes));
  ASSIGN_OR_RETURN(auto d_staging, emb::kernels::DeviceBuffer<uint8_t>::Allocate(staging_bytes));
  constexpr int kRows = 8;
  const int lanes = static_cast<int>(row_bytes / 16);
  ASSIGN_OR_RETURN(auto d_ids, emb::kernels::DeviceBuffer<int64_t>::Allocate(
                                   static_cast<size_t>(max_n) * batches));
  ASSIGN_OR_RETURN(auto d_out, emb::kernels::DeviceBuffer<uint4>::Allocate(
                                   static_cast<size_t>(max_n + kRows) * lanes));
  // streams[0] the kernel's; streams[t + 1] host thread t's copy.
  std::vector<emb::kernels::CudaStream> streams;
  for (int i = 0; i <= max_threads; ++i) {
    ASSIGN_OR_RETURN(emb::kernels::CudaStream stream, emb::kernels::CudaStream::Create());
    streams.push_back(std::move(stream));
  }
  const int64_t span_rows = static_cast<int64_t>(bytes / row_bytes);
  std::uniform_int_distribution<int64_t> pick(0, span_rows - 1);
  std::printf(
      "A batch's random rows of %lld bytes over %zu GiB of huge-page host memory: a share read "
      "by the kernel through the mapping while host threads copy the rest into pinned staging "
      "memory and on to the GPU (median of %d batches, us)\n\n| rows | host threads | kernel only "
      "| host 1/4 | host 1/2 | host 3/4 | host all |\n| ---: | ---: | ---: | ---: | ---: | ---: | "
      "---: |\n",
      static_cast<long long>(row_bytes), bytes >> 30, batches);
  for (const int64_t count : counts) {
    const int n = static_cast<int>(count);
    std::vector<int64_t> ids(static_cast<size_t>(n) * batches);
    for (int64_t& id : ids) id = pick(rng);
    RETURN_IF_ERROR(CudaStatus(
        cudaMemcpy(d_ids.data(), ids.data(), ids.size() * sizeof(int64_t), cudaMemcpyHostToDevice),
        "cudaMemcpy"));
    for (const int64_t thread_count : threads_list) {
      const int threads = static_cast<int>(thread_count);
      SpinPool pool(threads);
      std::string line = absl::StrFormat("| %d | %d |", n, threads);
      for (const int quarters : {0, 1, 2, 3, 4}) {
        const int host_rows = n * quarters / 4;
        const int kernel_rows = n - host_rows;
        std::vector<double> us;
        for (int b = -1; b < batches; ++b) {  // batch -1: a warm-up on batch 0's ids
          const int64_t* batch = ids.data() + static_cast<int64_t>(std::max(b, 0)) * n;
          const Clock::time_point t0 = Clock::now();
          if (kernel_rows > 0) {
            const int64_t kthreads = (kernel_rows + kRows - 1) / kRows * lanes;
            ReadRows<kRows>
                <<<static_cast<unsigned>((kthreads + 255) / 256), 256, 0, streams[0].get()>>>(
                    rows->device(), row_bytes,
                    d_ids.data() + static_cast<int64_t>(std::max(b, 0)) * n + host_rows,
                    kernel_rows, lanes, d_out.data());
          }
          if (host_rows > 0) {
            pool.Run([&](int t) {
              const int begin = static_cast<int>(static_cast<int64_t>(host_rows) * t / threads);
              const int end = static_cast<int>(static_cast<int64_t>(host_rows) * (t + 1) / threads);
              for (int i = begin; i < end; ++i) {
                if (i + 8 < end) __builtin_prefetch(host + batch[i + 8] * row_bytes);
                std::memcpy(staging.data() + static_cast<size_t>(i) * row_bytes,
                            host + batch[i] * row_bytes, row_bytes);
              }
              if (end > begin) {
                const size_t off = static_cast<size_t>(begin) * row_bytes;
                cudaMemcpyAsync(d_staging.data() + off, staging.data() + off,
                                static_cast<size_t>(end - begin) * row_bytes,
                                cudaMemcpyHostToDevice, streams[t + 1].get());
                cudaStreamSynchronize(streams[t + 1].get());
              }
            });
          }
          RETURN_IF_ERROR(CudaStatus(cudaStreamSynchronize(streams[0].get()), "kernel"));
          if (b >= 0) us.push_back(SecondsSince(t0) * 1e6);
        }
        std::sort(us.begin(), us.end());
        absl::StrAppendFormat(&line, " %.1f |", us[us.size() / 2]);
      }
      std::printf("%s\n", line.c_str());
      std::fflush(stdout);
    }
  }
  return CudaStatus(cudaGetLastError(), "probe");
}

struct Row {
  std::string memory;
  double fill_s = -1, refill_s = -1, register_s = -1;
  Reads whole, small;
  std::string note;
};

absl::Status Run(int argc, char** argv) {
  emb::bench::Flags flags(argc, argv);
  const int64_t gib = flags.Int("gib", 16, 1);
  const int64_t row_bytes = flags.Int("row_bytes", 512, 16);
  const int64_t ids = flags.Int("ids", 65536, 1);
  const int64_t batches = flags.Int("batches", 20, 1);
  const int64_t small_mib = flags.Int("small_mib", 256, 1);
  const std::string file = flags.Get("file", "/tmp/mapped_read_probe.bin");
  const int64_t touch_gib = flags.Int("touch_gib", 0, 0);
  const std::string ids_sweep = flags.Get("ids_sweep", "");
  const std::string host_gather = flags.Get("host_gather", "");
  const std::string gather_threads = flags.Get("gather_threads", "1,2,4,8,12");
  if (!flags.status().ok()) return flags.status();
  if (touch_gib > 0) {
    const size_t n = static_cast<size_t>(touch_gib) << 30;
    void* p = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return absl::ResourceExhaustedError("mmap");
    const unsigned all = std::max(1u, std::thread::hardware_concurrency());
    Clock::time_point t = Clock::now();
    Fill(static_cast<uint8_t*>(p), n, all);
    const double first = SecondsSince(t);
    t = Clock::now();
    Fill(static_cast<uint8_t*>(p), n, all);
    std::printf("touched %lld GiB with %u threads: first fill %.2f s (%.1f GB/s), second %.2f s\n",
                static_cast<long long>(touch_gib), all, first, static_cast<double>(n) / first / 1e9,
                SecondsSince(t));
    munmap(p, n);
    return absl::OkStatus();
  }
  if (row_bytes % 16 != 0 || row_bytes > 16 * 1024) {
    return absl::InvalidArgumentError("--row_bytes must be a multiple of 16, at most 16 KiB");
  }
  const size_t bytes = static_cast<size_t>(gib) << 30;
  const int64_t rows = static_cast<int64_t>(bytes / row_bytes);
  const int64_t small_rows =
      std::min<int64_t>(rows, (static_cast<int64_t>(small_mib) << 20) / row_bytes);
  const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  std::mt19937_64 rng(42);
  std::vector<Row> table;
  if (auto e = CudaStatus(cudaSetDevice(0), "cudaSetDevice"); !e.ok()) return e;
  if (!ids_sweep.empty()) {
    return SweepIds(ids_sweep, bytes, row_bytes, static_cast<int>(batches), threads, rng);
  }
  if (!host_gather.empty()) {
    return SweepHostGather(host_gather, gather_threads, bytes, row_bytes, static_cast<int>(batches),
                           threads, rng);
  }

  // Times the reads over the whole span and over the small one, at `device` (as the GPU
  // addresses the memory).
  auto measure = [&](Row& r, const void* device) -> absl::Status {
    ASSIGN_OR_RETURN(r.whole, TimeReads(static_cast<const uint8_t*>(device), row_bytes, rows, ids,
                                        static_cast<int>(batches), rng));
    ASSIGN_OR_RETURN(r.small, TimeReads(static_cast<const uint8_t*>(device), row_bytes, small_rows,
                                        ids, static_cast<int>(batches), rng));
    return absl::OkStatus();
  };
  // measure() for host memory the GPU maps.
  auto measure_mapped = [&](Row& r, void* host) -> absl::Status {
    void* device = nullptr;
    RETURN_IF_ERROR(
        CudaStatus(cudaHostGetDevicePointer(&device, host, 0), "cudaHostGetDevicePointer"));
    return measure(r, device);
  };

  // (a) GPU memory: the ceiling for the same reads.
  {
    Row r{"GPU memory (cudaMalloc)"};
    ASSIGN_OR_RETURN(auto d, emb::kernels::DeviceBuffer<std::byte>::Allocate(bytes));
    RETURN_IF_ERROR(CudaStatus(cudaMemset(d.data(), 1, bytes), "cudaMemset"));
    RETURN_IF_ERROR(measure(r, d.data()));
    table.push_back(r);
  }

  // (b) Anonymous memory as the host tier allocates it (HugePageRows), with huge pages and
  // advised back to 4 KiB pages: filled, refilled, registered.
  for (const bool huge : {true, false}) {
    Row r{huge ? "anonymous, transparent huge pages (the host tier's)"
               : "anonymous, 4 KiB pages (MADV_NOHUGEPAGE)"};
    ASSIGN_OR_RETURN(auto rows_memory, emb::service::HugePageRows::Allocate(bytes, "the probe"));
    auto* p = reinterpret_cast<uint8_t*>(rows_memory->mutable_data());
    if (!huge) {
      (void)madvise(p, bytes, MADV_NOHUGEPAGE);
    }
    Clock::time_point t = Clock::now();
    Fill(p, bytes, threads);
    r.fill_s = SecondsSince(t);
    t = Clock::now();
    Fill(p, bytes, threads);
    r.refill_s = SecondsSince(t);
    t = Clock::now();
    absl::Status s =
        CudaStatus(cudaHostRegister(p, bytes, cudaHostRegisterMapped | cudaHostRegisterPortable),
                   "cudaHostRegister");
    r.register_s = SecondsSince(t);
    if (s.ok()) {
      s.Update(measure_mapped(r, p));
      cudaHostUnregister(p);
    }
    if (!s.ok()) r.note = s.ToString();
    table.push_back(r);
  }

  // (c) cudaHostAlloc's pinned memory.
  {
    Row r{"cudaHostAlloc(Mapped)"};
    Clock::time_point t = Clock::now();
    auto pinned = emb::kernels::PinnedBuffer<std::byte>::Allocate(
        bytes, cudaHostAllocMapped | cudaHostAllocPortable);
    r.register_s = SecondsSince(t);
    absl::Status s = pinned.status();
    if (s.ok()) {
      t = Clock::now();
      Fill(reinterpret_cast<uint8_t*>(pinned->data()), bytes, threads);
      r.fill_s = SecondsSince(t);
      s.Update(measure_mapped(r, pinned->data()));
    }
    if (!s.ok()) r.note = s.ToString();
    table.push_back(r);
  }

  // (d) A file's page-cache pages, registered in place, read-only.
  {
    Row r{"a file's page cache, mapped read-only (cudaHostRegisterReadOnly)"};
    const int fd = open(file.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600);
    absl::Status s =
        fd >= 0 ? absl::OkStatus() : absl::InternalError(absl::StrCat(file, ": ", strerror(errno)));
    if (s.ok() && ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
      s.Update(absl::InternalError(absl::StrCat("ftruncate: ", strerror(errno))));
    }
    if (s.ok()) {
      // Written through a shared writable mapping (the page cache filled), then mapped again
      // read-only as a server would map a table file.
      void* w = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
      if (w == MAP_FAILED) {
        s.Update(absl::InternalError(absl::StrCat("mmap: ", strerror(errno))));
      } else {
        Clock::time_point t = Clock::now();
        Fill(static_cast<uint8_t*>(w), bytes, threads);
        r.fill_s = SecondsSince(t);
        munmap(w, bytes);
      }
    }
    void* m = MAP_FAILED;
    if (s.ok()) {
      m = mmap(nullptr, bytes, PROT_READ, MAP_SHARED | MAP_POPULATE, fd, 0);
      if (m == MAP_FAILED) s.Update(absl::InternalError(absl::StrCat("mmap: ", strerror(errno))));
    }
    if (s.ok()) {
      (void)madvise(m, bytes, MADV_HUGEPAGE);
      Clock::time_point t = Clock::now();
      s.Update(CudaStatus(cudaHostRegister(m, bytes,
                                           cudaHostRegisterMapped | cudaHostRegisterPortable |
                                               cudaHostRegisterReadOnly),
                          "cudaHostRegister(ReadOnly)"));
      r.register_s = SecondsSince(t);
      if (s.ok()) {
        s.Update(measure_mapped(r, m));
        cudaHostUnregister(m);
      }
    }
    if (m != MAP_FAILED) munmap(m, bytes);
    if (fd >= 0) {
      close(fd);
      unlink(file.c_str());
    }
    if (!s.ok()) r.note = s.ToString();
    table.push_back(r);
  }

  std::printf(
      "Random rows of %lld bytes, %lld a batch (median of %lld batches); span: all %lld "
      "GiB, or the first %lld MiB\n\n",
      static_cast<long long>(row_bytes), static_cast<long long>(ids),
      static_cast<long long>(batches), static_cast<long long>(gib),
      static_cast<long long>(small_mib));
  std::printf(
      "| memory | fill s (first touch) | refill s | pin s | GB/s, all | us, all | GB/s, "
      "small span | us, small span | note |\n");
  std::printf("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |\n");
  auto sec = [](double v) { return v < 0 ? std::string("-") : absl::StrFormat("%.2f", v); };
  for (const Row& r : table) {
    std::printf("| %s | %s | %s | %s | %.1f | %.0f | %.1f | %.0f | %s |\n", r.memory.c_str(),
                sec(r.fill_s).c_str(), sec(r.refill_s).c_str(), sec(r.register_s).c_str(),
                r.whole.gbps, r.whole.p50_us, r.small.gbps, r.small.p50_us, r.note.c_str());
  }
  std::printf("\n%u hardware threads fill; GB = 1e9 bytes\n", threads);
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  if (absl::Status s = Run(argc, argv); !s.ok()) {
    std::fprintf(stderr, "mapped_read_probe: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}
