// A table in a host tier (service/store/gpu/host_tier.h) against the same table in GPU memory and
// in host memory with no cache, side by side in one process through GpuStore, for power-law ids
// of several exponents and uniform ids. Prints one markdown table: per case, ids/s (one batch at
// a time), p50 and p99 of the batch time, the cache's hit rate over the measured batches, and the
// hit rate of the ideal static cache of the same size (the hottest rows, known in advance).
// Beside them, the alternative way to serve misses: gathering the rows on the host (threads over
// the host rows) and copying them to the device in one copy, for the batch's every row.
//
//   host_tier_benchmark [--rows=33554432] [--dim=128] [--batch=65536] [--cache_percent=10]
//                       [--exponents=0,0.8,1.05,1.2] [--batches=100] [--warmup_seconds=6]
//                       [--gather_threads=8] [--pool_batches=0] [--samples_per_batch=16384]
// Exponent 0 means uniform ids; the cache warms up on fresh batches drawn as it goes, or with
// --pool_batches=N on a pool of N batches drawn before it (faster, but a cache that sees the pool
// again and again learns its rarest ids as if they were hot: a pool of 512 batches held the hit
// rate at exponent 1.05 to 0.88, where fresh batches reach 0.90), and is measured on fresh
// ones. --samples_per_batch: the ids of each batch the cache's manager counts
// (StoreOptions::cache_samples_per_batch). The table is a float32 demo table
// (rows x dim); every store's answers are checked against the host rows (sampled rows of the first
// measured batch). Exits 1 on any failure.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <numeric>
#include <optional>
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
#include "absl/synchronization/notification.h"
#include "bench/common/bench_flags.h"
#include "bench/common/power_law.h"
#include "bench/common/seconds_since.h"
#include "kernels/cpu_gather.h"
#include "kernels/device_buffer.h"
#include "service/common/status_macros.h"
#include "service/store/gpu/gpu_store.h"
#include "service/store/gpu/host_tier.h"
#include "service/store/gpu/pinned_answer_memory.h"
#include "service/store/store_options.h"
#include "service/tables/table_source.h"

namespace emb::service {
namespace {

using bench::Clock;
using bench::SecondsSince;

// Batches of ids over `rows` rows: ranks of a power law of `exponent` (uniform for 0; PowerLaw),
// scattered over the rows by a multiplication modulo rows. Draws run on `threads` threads.
class IdStream {
 public:
  IdStream(int64_t rows, double exponent, uint64_t seed, int threads)
      : rows_(rows), law_(rows, exponent), seed_(seed), threads_(threads) {
    multiplier_ = 2654435761u;  // prime
    while (rows_ % static_cast<int64_t>(multiplier_) == 0) {
      multiplier_ += 2;
    }
  }
  std::vector<int64_t> Draw(size_t n) {
    std::vector<int64_t> ids(n);
    const uint64_t draw = draws_++;
    std::vector<std::thread> workers;
    workers.reserve(static_cast<size_t>(threads_));
    const size_t per = (n + threads_ - 1) / threads_;
    for (int t = 0; t < threads_; ++t) {
      workers.emplace_back([&, t] {
        std::mt19937_64 rng(seed_ * 1000003 + draw * 131 + static_cast<uint64_t>(t));
        std::uniform_real_distribution<double> u(0.0, 1.0);
        const size_t end = std::min(n, per * (t + 1));
        for (size_t i = per * t; i < end; ++i) {
          ids[i] = Scatter(law_.Rank(u(rng)));
        }
      });
    }
    for (std::thread& w : workers) {
      w.join();
    }
    return ids;
  }
  // The ideal static cache's hit rate: the probability of the `rows` hottest ranks.
  double TopShare(int64_t rows) const { return law_.TopShare(rows); }

 private:
  int64_t Scatter(int64_t rank) const {
    return static_cast<int64_t>((static_cast<unsigned __int128>(rank) * multiplier_) %
                                static_cast<uint64_t>(rows_));
  }

  int64_t rows_;
  bench::PowerLaw law_;
  uint64_t seed_;
  int threads_;
  uint64_t multiplier_;
  uint64_t draws_ = 0;
};

struct Timing {
  double ids_per_second = 0;
  double p50_us = 0;
  double p99_us = 0;
  double hit_rate = -1;    // -1: no cache
  double wall_p50_us = 0;  // the whole LookUp, with the answer's copy to the host
};

double Percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

// One LookUp of `ids` into `out` (pinned answer memory), waited for; its gather stage's seconds
// (the kernel alone, timed by the store's CUDA events).
absl::StatusOr<double> LookUpOnce(EmbeddingStore& store, const std::vector<int64_t>& ids,
                                  const AnswerSpan& out) {
  absl::Status status;
  double gather = 0;
  absl::Notification done;
  store.LookUp(ids, DataType::kFloat32, absl::MakeConstSpan(&out, 1),
               [&](const absl::Status& s, const StageTimes& times) {
                 status = s;
                 gather = times.gather;
                 done.Notify();
               });
  done.WaitForNotification();
  if (!status.ok()) {
    return status;
  }
  return gather;
}

// Sampled rows of `out` against the host rows.
absl::Status Check(const std::vector<int64_t>& ids, const std::byte* out, const std::byte* rows,
                   size_t row_bytes, const std::string& what) {
  for (size_t i = 0; i < ids.size(); i += 997) {
    if (std::memcmp(out + i * row_bytes, rows + static_cast<size_t>(ids[i]) * row_bytes,
                    row_bytes) != 0) {
      return absl::InternalError(
          absl::StrCat(what, ": row ", ids[i], " (answer row ", i, ") differs from the table"));
    }
  }
  return absl::OkStatus();
}

// Warm-up for `warmup_seconds`, then `batches` timed batches, one at a time.
absl::StatusOr<Timing> Measure(EmbeddingStore& store, IdStream& stream, size_t batch, int batches,
                               double warmup_seconds, int pool_batches, const AnswerSpan& out,
                               const std::byte* host_rows, const std::string& what) {
  const size_t row_bytes = static_cast<size_t>(store.info().dim) * sizeof(float);
  // The warm-up's batches: a pool drawn before it starts, or (pool_batches 0) each drawn fresh.
  std::vector<std::vector<int64_t>> pool;
  pool.reserve(static_cast<size_t>(pool_batches));
  for (int i = 0; i < pool_batches; ++i) {
    pool.push_back(stream.Draw(batch));
  }
  // The warm-up, with the hit rate of each second of it (the cache warming).
  const Clock::time_point warm = Clock::now();
  std::optional<CacheStats> last = store.cache_stats();
  double next_second = 1;
  std::string warming;
  std::vector<int64_t> fresh;
  for (size_t i = 0; SecondsSince(warm) < warmup_seconds; ++i) {
    if (pool.empty()) {
      fresh = stream.Draw(batch);
    }
    RETURN_IF_ERROR(LookUpOnce(store, pool.empty() ? fresh : pool[i % pool.size()], out).status());
    if (last.has_value() && last->capacity_rows > 0 && SecondsSince(warm) >= next_second) {
      const CacheStats now = *store.cache_stats();
      absl::StrAppendFormat(&warming, " %.3f",
                            1.0 - static_cast<double>(now.misses - last->misses) /
                                      static_cast<double>(now.lookups - last->lookups));
      last = now;
      next_second += 1;
    }
  }
  if (!warming.empty()) {
    std::fprintf(stderr, "%s: hit rate in each second of the warm-up:%s\n", what.c_str(),
                 warming.c_str());
  }
  // Fresh ids for the measured batches (drawn before the clock starts).
  std::vector<std::vector<int64_t>> measured;
  measured.reserve(static_cast<size_t>(batches));
  for (int i = 0; i < batches; ++i) {
    measured.push_back(stream.Draw(batch));
  }
  const std::optional<CacheStats> before = store.cache_stats();
  std::vector<double> us;  // the gather stage
  std::vector<double> wall_us;
  for (int i = 0; i < batches; ++i) {
    const Clock::time_point t = Clock::now();
    ASSIGN_OR_RETURN(const double gather, LookUpOnce(store, measured[static_cast<size_t>(i)], out));
    wall_us.push_back(SecondsSince(t) * 1e6);
    us.push_back(gather * 1e6);
    if (i == 0) {
      RETURN_IF_ERROR(Check(measured[0], out.host.data(), host_rows, row_bytes, what));
    }
  }
  double total_us = 0;
  for (const double u : us) {
    total_us += u;
  }
  Timing timing;
  timing.ids_per_second = static_cast<double>(batch) * batches / (total_us / 1e6);
  timing.p50_us = Percentile(us, 0.5);
  timing.p99_us = Percentile(us, 0.99);
  timing.wall_p50_us = Percentile(wall_us, 0.5);
  if (before.has_value() && before->capacity_rows > 0) {
    const CacheStats after = *store.cache_stats();
    const double lookups = static_cast<double>(after.lookups - before->lookups);
    timing.hit_rate = 1.0 - static_cast<double>(after.misses - before->misses) / lookups;
  }
  return timing;
}

// The other way to serve rows from host memory: `threads` threads gather the batch's rows from
// the host rows into pinned memory, then one copy takes them to the device.
absl::StatusOr<Timing> MeasureHostGather(const std::byte* rows, int64_t dim, IdStream& stream,
                                         size_t batch, int batches, int threads) {
  const size_t row_bytes = static_cast<size_t>(dim) * sizeof(float);
  ASSIGN_OR_RETURN(auto staged, kernels::PinnedBuffer<std::byte>::Allocate(batch * row_bytes));
  ASSIGN_OR_RETURN(auto device, kernels::DeviceBuffer<std::byte>::Allocate(batch * row_bytes));
  std::vector<double> us;
  const Clock::time_point start = Clock::now();
  for (int b = 0; b < batches; ++b) {
    const std::vector<int64_t> ids = stream.Draw(batch);
    const Clock::time_point t = Clock::now();
    std::vector<std::thread> workers;
    workers.reserve(static_cast<size_t>(threads));
    const size_t per = (batch + threads - 1) / threads;
    for (int w = 0; w < threads; ++w) {
      const size_t first = std::min(batch, per * w);
      const size_t n = std::min(batch, first + per) - first;
      workers.emplace_back([&, first, n] {
        kernels::CpuGather(rows, DataType::kFloat32, dim,
                           absl::MakeConstSpan(ids).subspan(first, n), DataType::kFloat32,
                           staged.data() + first * row_bytes);
      });
    }
    for (std::thread& w : workers) {
      w.join();
    }
    if (cudaMemcpy(device.data(), staged.data(), batch * row_bytes, cudaMemcpyHostToDevice) !=
        cudaSuccess) {
      return absl::InternalError("cudaMemcpy of the gathered rows");
    }
    us.push_back(SecondsSince(t) * 1e6);
  }
  (void)start;
  Timing timing;
  double sum = 0;
  for (double u : us) {
    sum += u;
  }
  timing.ids_per_second = static_cast<double>(batch) * batches / (sum / 1e6);
  timing.p50_us = Percentile(us, 0.5);
  timing.p99_us = Percentile(us, 0.99);
  return timing;
}

int Run(int argc, char** argv) {
  bench::Flags flags(argc, argv);
  const int64_t rows = flags.Int("rows", 33554432, 1);
  const int64_t dim = flags.Int("dim", 128, 1);
  const int64_t batch = flags.Int("batch", 65536, 1);
  const int64_t cache_percent = flags.Int("cache_percent", 10, 0);
  const int64_t batches = flags.Int("batches", 100, 1);
  const int64_t gather_threads = flags.Int("gather_threads", 8, 1);
  const int64_t pool_batches = flags.Int("pool_batches", 0, 0);
  const int64_t samples_per_batch = flags.Int("samples_per_batch", 16384, 1);
  const double warmup_seconds = flags.Double("warmup_seconds", 6, 0);
  if (!flags.status().ok()) {
    std::fprintf(stderr, "host_tier_benchmark: %s\n", flags.status().ToString().c_str());
    return 2;
  }
  std::vector<double> exponents;
  for (absl::string_view e : absl::StrSplit(flags.Get("exponents", "0,0.8,1.05,1.2"), ',')) {
    double x = 0;
    if (!absl::SimpleAtod(e, &x)) {
      std::fprintf(stderr, "bad --exponents\n");
      return 2;
    }
    exponents.push_back(x);
  }
  auto fail = [](const absl::Status& s) {
    std::fprintf(stderr, "host_tier_benchmark: %s\n", s.ToString().c_str());
    return 1;
  };
  const auto source = TableSource::Demo("bench", rows, dim, 1);
  StoreOptions options;
  options.max_batch_ids = batch;
  options.inflight_batches = 2;
  options.cache_samples_per_batch = static_cast<size_t>(samples_per_batch);
  const int64_t cache_rows = rows * cache_percent / 100;
  const size_t buffers = GpuStore::BatchBufferBytes(options, dim);
  struct Case {
    std::string name;
    std::unique_ptr<GpuStore> store;
  };
  std::vector<Case> cases;
  for (const auto& [name, budget] :
       {std::pair<std::string, size_t>{"GPU memory (HBM)", 0},
        {"host memory, no cache", buffers + HostTier::DeviceBytes(rows, 0, source->row_bytes())},
        {absl::StrCat("host memory, cache ", cache_percent, "% (ours)"),
         buffers + HostTier::DeviceBytes(rows, cache_rows, source->row_bytes())}}) {
    StoreOptions o = options;
    o.gpu_budget_bytes = budget;
    const Clock::time_point t = Clock::now();
    auto store = GpuStore::Create(*source, 0, o);
    if (!store.ok()) {
      return fail(store.status());
    }
    std::fprintf(stderr, "%s: loaded in %.1f s\n", name.c_str(), SecondsSince(t));
    cases.push_back(Case{name, std::move(*store)});
  }
  auto host_rows = source->ReadAll();
  if (!host_rows.ok()) {
    return fail(host_rows.status());
  }
  PinnedAnswerMemory pinned(0);
  const size_t out_bytes = static_cast<size_t>(batch) * source->row_bytes();
  const HostBlock block = pinned.Allocate(out_bytes);
  if (block.host == nullptr) {
    return fail(absl::ResourceExhaustedError("pinned answer memory"));
  }
  const AnswerSpan out{absl::MakeSpan(static_cast<std::byte*>(block.host), out_bytes),
                       static_cast<std::byte*>(block.device)};

  std::printf(
      "Table %lld rows x %lld float32 (%.1f GiB), batches of %lld ids, one at a time; "
      "the cache's warm-up on %s, %lld ids of a batch counted; cache %lld rows (%lld%%).\n\n",
      static_cast<long long>(rows), static_cast<long long>(dim),
      static_cast<double>(source->bytes()) / (1u << 30), static_cast<long long>(batch),
      pool_batches == 0 ? "fresh batches"
                        : absl::StrCat("a pool of ", pool_batches, " batches").c_str(),
      static_cast<long long>(samples_per_batch), static_cast<long long>(cache_rows),
      static_cast<long long>(cache_percent));
  std::printf(
      "| ids | table | Mids/s | p50 us | p99 us | hit rate | ideal static cache | x no cache | "
      "LookUp p50 us |\n");
  std::printf("|---|---|---:|---:|---:|---:|---:|---:|---:|\n");
  for (const double exponent : exponents) {
    const std::string ids = exponent == 0 ? "uniform" : absl::StrFormat("power law %.2f", exponent);
    IdStream stream(rows, exponent, 7, static_cast<int>(gather_threads));
    const double ideal = stream.TopShare(cache_rows);
    double no_cache = 0;
    for (Case& c : cases) {
      const bool cached =
          c.store->cache_stats().has_value() && c.store->cache_stats()->capacity_rows > 0;
      auto timing =
          Measure(*c.store, stream, static_cast<size_t>(batch), static_cast<int>(batches),
                  cached ? warmup_seconds : 0.5, cached ? static_cast<int>(pool_batches) : 0, out,
                  (*host_rows)->data(), c.name);
      if (!timing.ok()) {
        return fail(timing.status());
      }
      if (c.store->info().host_tier && !cached) {
        no_cache = timing->ids_per_second;
      }
      std::printf("| %s | %s | %.1f | %.0f | %.0f | %s | %s | %s | %.0f |\n", ids.c_str(),
                  c.name.c_str(), timing->ids_per_second / 1e6, timing->p50_us, timing->p99_us,
                  timing->hit_rate >= 0 ? absl::StrFormat("%.3f", timing->hit_rate).c_str() : "",
                  cached ? absl::StrFormat("%.3f", ideal).c_str() : "",
                  c.store->info().host_tier && no_cache > 0
                      ? absl::StrFormat("%.2f", timing->ids_per_second / no_cache).c_str()
                      : "",
                  timing->wall_p50_us);
      std::fflush(stdout);
    }
    auto gathered = MeasureHostGather((*host_rows)->data(), dim, stream, static_cast<size_t>(batch),
                                      20, static_cast<int>(gather_threads));
    if (!gathered.ok()) {
      return fail(gathered.status());
    }
    std::printf(
        "| %s | host memory: gathered on the host (%lld threads), one copy | %.1f | %.0f | "
        "%.0f | | | %.2f | |\n",
        ids.c_str(), static_cast<long long>(gather_threads), gathered->ids_per_second / 1e6,
        gathered->p50_us, gathered->p99_us,
        no_cache > 0 ? gathered->ids_per_second / no_cache : 0.0);
  }
  pinned.Release(block.host);
  return 0;
}

}  // namespace
}  // namespace emb::service

int main(int argc, char** argv) { return emb::service::Run(argc, argv); }
