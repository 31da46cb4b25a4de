// How fast a table file reaches GPU memory through GpuStore::Create, against what the host reaches
// from pinned memory. Writes a float32 .npy of --bytes at --path (or takes the table already
// there), then prints one markdown table:
//   - the pinned host-to-device ceiling: cudaMemcpyAsync from a pinned buffer, in copies of up to
//     1 GiB and in copies of the load's chunk size;
//   - cudaHostAlloc of the default load's staging (a cost every load pays);
//   - each --readers setting with the file in the page cache (after one unrecorded load), the
//     median of --turns loads, and after evicting the file from the page cache (fsync, then
//     posix_fadvise(DONTNEED); /proc/sys/vm/drop_caches where that left pages cached).
// Every load is checked: sampled rows read back from the device must equal the file's. Exits 1 on
// any failure.
//
//   load_benchmark [--path=/tmp/emb_load_benchmark.npy] [--bytes=4294967296] [--dim=1024]
//                  [--readers=1,0] [--chunk_bytes=0] [--turns=3] [--cold_turns=1] [--rewrite=0]
// --readers=0 is the store's default (min(8, hardware threads)); --chunk_bytes=0 its default.
// --gpu_budget=BYTES (0: none) adds warm loads with that GPU budget, so that a larger table is read
// into pinned host memory under a GPU cache (the host tier) rather than onto the device.
// A float32 table of --bytes / (4 * dim) rows already at --path is used again (--rewrite=1
// writes it anew); --bytes=0 takes whatever table is at --path. --cold_turns=0 skips the cold
// case.
#include <cuda_runtime_api.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
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
#include "absl/synchronization/blocking_counter.h"
#include "bench/common/bench_flags.h"
#include "bench/common/seconds_since.h"
#include "kernels/cuda_status.h"
#include "kernels/cuda_stream.h"
#include "kernels/device_buffer.h"
#include "service/common/status_macros.h"
#include "service/store/gpu/gpu_store.h"
#include "service/store/load_plan.h"
#include "service/store/store_options.h"
#include "service/tables/table_source.h"
#include "service/tables/table_spec.h"

namespace emb::service {
namespace {

using bench::Clock;
using bench::SecondsSince;

double GBps(double bytes, double seconds) { return seconds > 0 ? bytes / seconds / 1e9 : 0; }

// Element i of the benchmark table: finite, and different for neighbouring elements and rows.
float Element(uint64_t i) {
  return static_cast<float>(static_cast<uint32_t>(i * 2654435761u) >> 8) / 16777216.0f - 0.5f;
}

// Writes a rows x dim float32 .npy (format 1.0) at `path`, in 64 MiB writes.
absl::Status WriteNpy(const std::string& path, int64_t rows, int64_t dim) {
  std::string header =
      absl::StrCat("{'descr': '<f4', 'fortran_order': False, 'shape': (", rows, ", ", dim, "), }");
  const size_t unpadded = 10 + header.size() + 1;  // magic, version, length, dict, '\n'
  header.append((64 - unpadded % 64) % 64, ' ');
  header.push_back('\n');
  std::string prefix("\x93NUMPY\x01\x00", 8);
  prefix.push_back(static_cast<char>(header.size() & 0xff));
  prefix.push_back(static_cast<char>(header.size() >> 8));
  prefix += header;

  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    return absl::InternalError(absl::StrCat(path, ": cannot create: ", std::strerror(errno)));
  }
  auto write_all = [fd, &path](const char* p, size_t n) {
    while (n > 0) {
      const ssize_t w = write(fd, p, n);
      if (w < 0 && errno == EINTR) {
        continue;
      }
      if (w <= 0) {
        return absl::InternalError(absl::StrCat(path, ": write failed: ", std::strerror(errno)));
      }
      p += w;
      n -= static_cast<size_t>(w);
    }
    return absl::OkStatus();
  };
  absl::Status status = write_all(prefix.data(), prefix.size());
  const uint64_t elements = static_cast<uint64_t>(rows) * static_cast<uint64_t>(dim);
  std::vector<float> block(size_t{16} << 20);  // 64 MiB
  for (uint64_t first = 0; status.ok() && first < elements; first += block.size()) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(block.size(), elements - first));
    for (size_t j = 0; j < n; ++j) {
      block[j] = Element(first + j);
    }
    status = write_all(reinterpret_cast<const char*>(block.data()), n * sizeof(float));
  }
  if (close(fd) != 0 && status.ok()) {
    status = absl::InternalError(absl::StrCat(path, ": close failed: ", std::strerror(errno)));
  }
  return status;
}

// The fraction of the file's pages in the page cache (mincore), or -1 when it can't be told.
double Resident(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0 || st.st_size == 0) {
    if (fd >= 0) {
      close(fd);
    }
    return -1;
  }
  const auto length = static_cast<size_t>(st.st_size);
  void* base = mmap(nullptr, length, PROT_READ, MAP_SHARED, fd, 0);
  close(fd);
  if (base == MAP_FAILED) {
    return -1;
  }
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> in_core((length + page - 1) / page);
  double fraction = -1;
  if (mincore(base, length, in_core.data()) == 0) {
    size_t resident = 0;
    for (unsigned char c : in_core) {
      resident += c & 1;
    }
    fraction = static_cast<double>(resident) / static_cast<double>(in_core.size());
  }
  munmap(base, length);
  return fraction;
}

// Drops the file from the page cache: fsync and posix_fadvise(DONTNEED), then, if more than 1% is
// still cached, drop_caches (root only). Returns the fraction still cached (-1: unknown).
double Evict(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    (void)fsync(fd);
    (void)posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    close(fd);
  }
  double left = Resident(path);
  if (left > 0.01) {
    sync();
    if (FILE* f = std::fopen("/proc/sys/vm/drop_caches", "w"); f != nullptr) {
      std::fputs("1\n", f);
      std::fclose(f);
    }
    left = Resident(path);
  }
  return left;
}

// Reads `ids` back from `store` and compares them with the file's rows.
absl::Status CheckRows(GpuStore& store, const TableSource& source) {
  std::vector<int64_t> ids = {0, source.rows() - 1};
  std::mt19937_64 rng(source.rows());
  while (ids.size() < 64) {
    ids.push_back(static_cast<int64_t>(rng() % static_cast<uint64_t>(source.rows())));
  }
  std::string got(ids.size() * source.row_bytes(), '\0');
  const AnswerSpan outs[] = {
      AnswerSpan{absl::MakeSpan(reinterpret_cast<std::byte*>(got.data()), got.size())}};
  absl::Status status;
  absl::BlockingCounter done(1);
  store.LookUp(ids, source.dtype(), outs, [&](const absl::Status& s, const StageTimes&) {
    status = s;
    done.DecrementCount();
  });
  done.Wait();
  if (!status.ok()) {
    return status;
  }
  std::string want(source.row_bytes(), '\0');
  for (size_t i = 0; i < ids.size(); ++i) {
    const size_t offset = static_cast<size_t>(ids[i]) * source.row_bytes();
    if (absl::Status s = source.Read(
            offset, absl::MakeSpan(reinterpret_cast<std::byte*>(want.data()), want.size()));
        !s.ok()) {
      return s;
    }
    if (got.compare(i * want.size(), want.size(), want) != 0) {
      return absl::DataLossError(
          absl::StrCat("row ", ids[i], " on the device differs from the file"));
    }
  }
  return absl::OkStatus();
}

struct Row {
  std::string name;
  int turns = 0;
  size_t bytes = 0;
  double seconds = 0;
  double read_rate = 0;  // bytes per second; 0: not applicable
  double copy_rate = 0;
  double create_seconds = 0;
};

// One GpuStore::Create of the table; its upload's statistics and Create's own wall time.
absl::StatusOr<std::pair<LoadStats, double>> LoadOnce(const TableSource& source, int readers,
                                                      size_t chunk_bytes, size_t gpu_budget = 0) {
  StoreOptions options;
  options.gpu_budget_bytes = gpu_budget;
  options.max_batch_ids = 1024;
  options.inflight_batches = 1;
  options.load_readers = readers;
  options.load_chunk_bytes = chunk_bytes;
  const Clock::time_point start = Clock::now();
  absl::StatusOr<std::unique_ptr<GpuStore>> store = GpuStore::Create(source, 0, options);
  const double create_seconds = SecondsSince(start);
  if (!store.ok()) {
    return store.status();
  }
  if (absl::Status s = CheckRows(**store, source); !s.ok()) {
    return s;
  }
  return std::make_pair((*store)->load_stats(), create_seconds);
}

// The median of the turns by upload time.
Row Median(std::string name, std::vector<std::pair<LoadStats, double>> turns) {
  std::sort(turns.begin(), turns.end(),
            [](const auto& a, const auto& b) { return a.first.seconds < b.first.seconds; });
  const auto& [stats, create_seconds] = turns[turns.size() / 2];
  return Row{std::move(name),   static_cast<int>(turns.size()),
             stats.bytes,       stats.seconds,
             stats.read_rate(), stats.copy_rate(),
             create_seconds};
}

// Seconds of `reps` rounds of copying `h_src` to `d_dst` in copies of `piece` bytes on one stream.
absl::StatusOr<double> PinnedCopySeconds(const std::byte* h_src, std::byte* d_dst, size_t bytes,
                                         size_t piece, int reps) {
  ASSIGN_OR_RETURN(kernels::CudaStream stream, kernels::CudaStream::Create());
  ASSIGN_OR_RETURN(kernels::CudaEvent start, kernels::CudaEvent::Create(/*timing=*/true));
  ASSIGN_OR_RETURN(kernels::CudaEvent end, kernels::CudaEvent::Create(/*timing=*/true));
  EMB_CUDA_RETURN_IF_ERROR(cudaEventRecord(start.get(), stream.get()), "cudaEventRecord");
  for (int r = 0; r < reps; ++r) {
    for (size_t offset = 0; offset < bytes; offset += piece) {
      EMB_CUDA_RETURN_IF_ERROR(
          cudaMemcpyAsync(d_dst + offset, h_src + offset, std::min(piece, bytes - offset),
                          cudaMemcpyHostToDevice, stream.get()),
          "cudaMemcpyAsync");
    }
  }
  EMB_CUDA_RETURN_IF_ERROR(cudaEventRecord(end.get(), stream.get()), "cudaEventRecord");
  EMB_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(end.get()), "cudaEventSynchronize");
  float ms = 0;
  EMB_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&ms, start.get(), end.get()),
                           "cudaEventElapsedTime");
  return ms / 1e3;
}

absl::Status Run(int argc, char** argv) {
  bench::Flags flags(argc, argv);
  const std::string path = flags.Get("path", "/tmp/emb_load_benchmark.npy");
  const int64_t want_bytes = flags.Int("bytes", int64_t{1} << 32, 0);
  const int64_t dim = flags.Int("dim", 1024, 1);
  const int64_t turns = flags.Int("turns", 3, 1);
  const int64_t cold_turns = flags.Int("cold_turns", 1, 0);
  const int64_t chunk_flag = flags.Int("chunk_bytes", 0, 0);
  const int64_t rewrite = flags.Int("rewrite", 0, 0);
  const int64_t gpu_budget = flags.Int("gpu_budget", 0, 0);
  RETURN_IF_ERROR(flags.status());
  std::vector<int> reader_settings;
  for (absl::string_view r : absl::StrSplit(flags.Get("readers", "1,0"), ',')) {
    int v = 0;
    if (!absl::SimpleAtoi(r, &v) || v < 0) {
      return absl::InvalidArgumentError(absl::StrCat("--readers: '", r, "' is not a count"));
    }
    reader_settings.push_back(v);
  }
  if (want_bytes != 0 && want_bytes < dim * 4) {
    return absl::InvalidArgumentError("--bytes must be 0 or >= 4 * dim");
  }
  const auto chunk_bytes = static_cast<size_t>(chunk_flag);

  // (a) The table file.
  // --bytes=0 takes the table at --path as it is; otherwise a table there of the asked size is
  // used again, and anything else is replaced.
  const int64_t want_rows = want_bytes / (dim * 4);
  absl::StatusOr<std::unique_ptr<TableSource>> source;
  if (rewrite == 0) {
    source = TableSource::Open(TableSpec{"bench", path, "", {}});
  }
  const bool fits = source.ok() && (want_bytes == 0 ||
                                    ((*source)->dtype() == DataType::kFloat32 &&
                                     (*source)->rows() == want_rows && (*source)->dim() == dim));
  if (rewrite != 0 || !fits) {
    if (want_bytes == 0) {
      return source.ok() ? absl::InvalidArgumentError("--bytes=0 and --rewrite=1")
                         : source.status();
    }
    std::fprintf(stderr, "writing %s: %lld x %lld float32\n", path.c_str(),
                 static_cast<long long>(want_rows), static_cast<long long>(dim));
    const Clock::time_point start = Clock::now();
    RETURN_IF_ERROR(WriteNpy(path, want_rows, dim));
    std::fprintf(stderr, "written in %.1f s\n", SecondsSince(start));
    source = TableSource::Open(TableSpec{"bench", path, "", {}});
  }
  if (!source.ok()) {
    return source.status();
  }
  const TableSource& table = **source;
  const size_t bytes = table.bytes();
  std::fprintf(stderr, "table %s: %lld x %lld %s, %zu bytes\n", table.origin().c_str(),
               static_cast<long long>(table.rows()), static_cast<long long>(table.dim()),
               DataTypeName(table.dtype()), bytes);
  std::vector<Row> rows;

  // (b) The pinned ceiling, and what the default load's staging costs to allocate.
  EMB_CUDA_RETURN_IF_ERROR(cudaSetDevice(0), "cudaSetDevice");
  const LoadPlan plan = PlanLoad(bytes, 0, chunk_bytes, std::thread::hardware_concurrency());
  {
    const size_t n = std::min(bytes, size_t{1} << 30);
    ASSIGN_OR_RETURN(auto h_src, kernels::PinnedBuffer<std::byte>::Allocate(n));
    ASSIGN_OR_RETURN(auto d_dst, kernels::DeviceBuffer<std::byte>::Allocate(n));
    std::memset(h_src.data(), 1, n);
    ASSIGN_OR_RETURN(double warm, PinnedCopySeconds(h_src.data(), d_dst.data(), n, n, 1));
    (void)warm;
    constexpr int kReps = 8;
    ASSIGN_OR_RETURN(double whole, PinnedCopySeconds(h_src.data(), d_dst.data(), n, n, kReps));
    rows.push_back(Row{absl::StrCat("pinned H2D ceiling (", n >> 20, " MiB copies)"), kReps,
                       n * kReps, whole, 0, 0, 0});
    ASSIGN_OR_RETURN(double chunked,
                     PinnedCopySeconds(h_src.data(), d_dst.data(), n, plan.chunk_bytes, kReps));
    rows.push_back(Row{absl::StrFormat("pinned H2D ceiling (%.3g MiB copies)",
                                       static_cast<double>(plan.chunk_bytes) / (1 << 20)),
                       kReps, n * kReps, chunked, 0, 0, 0});
  }
  {
    const Clock::time_point start = Clock::now();
    std::vector<kernels::PinnedBuffer<std::byte>> staging;
    for (int i = 0; i < plan.readers * kStagingBuffersPerReader; ++i) {
      ASSIGN_OR_RETURN(auto h, kernels::PinnedBuffer<std::byte>::Allocate(plan.chunk_bytes));
      staging.push_back(std::move(h));
    }
    rows.push_back(Row{absl::StrFormat("cudaHostAlloc of the default staging (%d x %.3g MiB)",
                                       plan.readers * kStagingBuffersPerReader,
                                       static_cast<double>(plan.chunk_bytes) / (1 << 20)),
                       1, plan.staging_bytes(), SecondsSince(start), 0, 0, 0});
  }

  // (c) Warm page cache: one unrecorded load reads the file, then the turns.
  ASSIGN_OR_RETURN(auto first, LoadOnce(table, 0, chunk_bytes));
  std::fprintf(stderr, "first load (unrecorded, the page cache as found): %.3f s\n",
               first.first.seconds);
  auto describe = [&](int readers) {
    const LoadPlan p = PlanLoad(bytes, readers, chunk_bytes, std::thread::hardware_concurrency());
    return absl::StrFormat("readers=%d%s, %.3g MiB chunks", p.readers,
                           readers == 0 ? " (default)" : "",
                           static_cast<double>(p.chunk_bytes) / (1 << 20));
  };
  for (int readers : reader_settings) {
    std::vector<std::pair<LoadStats, double>> done;
    for (int64_t t = 0; t < turns; ++t) {
      ASSIGN_OR_RETURN(auto turn, LoadOnce(table, readers, chunk_bytes));
      done.push_back(turn);
    }
    rows.push_back(Median(absl::StrCat("warm, ", describe(readers)), std::move(done)));
  }

  // (c') Warm, into the host tier under a GPU budget (the default readers).
  if (gpu_budget > 0) {
    std::vector<std::pair<LoadStats, double>> done;
    for (int64_t t = 0; t < turns; ++t) {
      ASSIGN_OR_RETURN(auto turn, LoadOnce(table, 0, chunk_bytes, static_cast<size_t>(gpu_budget)));
      done.push_back(turn);
    }
    rows.push_back(Median(absl::StrFormat("warm, host tier (GPU budget %.3g GiB), %s",
                                          static_cast<double>(gpu_budget) / (1 << 30), describe(0)),
                          std::move(done)));
  }

  // (d) Cold: the file evicted from the page cache before each load.
  for (int readers : reader_settings) {
    std::vector<std::pair<LoadStats, double>> done;
    double left = 0;
    for (int64_t t = 0; t < cold_turns; ++t) {
      left = std::max(left, Evict(path));
      ASSIGN_OR_RETURN(auto turn, LoadOnce(table, readers, chunk_bytes));
      done.push_back(turn);
    }
    if (!done.empty()) {
      const std::string cached = left < 0
                                     ? "page cache state unknown"
                                     : absl::StrFormat("%.0f%% still cached before", 100 * left);
      rows.push_back(
          Median(absl::StrCat("cold (", cached, "), ", describe(readers)), std::move(done)));
    }
  }

  // (e) The table.
  std::printf("| case | turns | bytes | seconds | GB/s | read GB/s | copy GB/s | Create s |\n");
  std::printf("| --- | --- | --- | --- | --- | --- | --- | --- |\n");
  auto rate = [](double r) { return r > 0 ? absl::StrFormat("%.2f", r / 1e9) : std::string("-"); };
  for (const Row& r : rows) {
    const std::string create =
        r.create_seconds > 0 ? absl::StrFormat("%.3f", r.create_seconds) : std::string("-");
    std::printf("| %s | %d | %zu | %.3f | %.2f | %s | %s | %s |\n", r.name.c_str(), r.turns,
                r.bytes, r.seconds, GBps(static_cast<double>(r.bytes), r.seconds),
                rate(r.read_rate).c_str(), rate(r.copy_rate).c_str(), create.c_str());
  }
  std::printf("\nhost: %u hardware threads; GB = 1e9 bytes\n", std::thread::hardware_concurrency());
  return absl::OkStatus();
}

}  // namespace
}  // namespace emb::service

int main(int argc, char** argv) {
  if (absl::Status s = emb::service::Run(argc, argv); !s.ok()) {
    std::fprintf(stderr, "load_benchmark: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}
