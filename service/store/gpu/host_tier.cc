#include "service/store/gpu/host_tier.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "kernels/scatter_rows.h"
#include "service/common/log.h"
#include "service/common/status_macros.h"

namespace emb::service {
namespace {

// Sampled ids waiting for the manager, at most; past it, batches hand over none.
constexpr size_t kMaxIntake = size_t{1} << 20;
constexpr size_t kHugePage = size_t{2} << 20;

// The host memory that can be had without swapping (MemAvailable: free memory and the page cache
// that can be dropped), or 0 where /proc/meminfo does not say.
size_t AvailableHostMemory() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  size_t kib = 0;
  std::string unit;
  while (meminfo >> key >> kib >> unit) {
    if (key == "MemAvailable:") {
      return kib << 10;
    }
  }
  return 0;
}

}  // namespace

absl::StatusOr<std::unique_ptr<PinnedHostRows>> PinnedHostRows::Read(const TableSource& source,
                                                                     const CudaCheck& check,
                                                                     const StoreOptions& options,
                                                                     LoadStats* stats) {
  const absl::Time start = options.clock->Now();
  // Refused before a page is touched: pinned memory cannot be swapped out, and a table larger
  // than the memory there is would have the kernel end the process.
  if (const size_t available = AvailableHostMemory(); available > 0 && source.bytes() > available) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "table '", source.name(), "' does not fit in host memory either: its rows take ",
        source.bytes(), " bytes and ", available, " are available"));
  }
  ASSIGN_OR_RETURN(
      std::unique_ptr<HugePageRows> rows,
      HugePageRows::Allocate(source.bytes(), absl::StrCat("table '", source.name(), "'")));
  // The reads go straight into the rows, with no staging to bound the readers, and each also
  // faults in (and zeroes) fresh pages: CPU work that every hardware thread can share.
  const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  LoadPlan plan = PlanLoad(source.bytes(), options.load_readers, options.load_chunk_bytes, threads);
  if (options.load_readers <= 0) {
    plan.readers = static_cast<int>(std::min<size_t>(threads, plan.chunks));
  }
  ASSIGN_OR_RETURN(*stats, ReadTable(source, plan, rows->mutable_data(), options.clock));
  const absl::Time read_end = options.clock->Now();
  auto pinned =
      std::unique_ptr<PinnedHostRows>(new PinnedHostRows(std::move(rows), source.bytes()));
  RETURN_IF_ERROR(check(cudaSetDevice(check.device()), "cudaSetDevice"));
  // Whole huge pages (HugePageRows allocates them).
  const size_t length = (source.bytes() + kHugePage - 1) / kHugePage * kHugePage;
  if (const cudaError_t e = cudaHostRegister(pinned->host(), length,
                                             cudaHostRegisterMapped | cudaHostRegisterPortable);
      e != cudaSuccess) {
    const absl::Status s = check(e, "cudaHostRegister");
    return absl::ResourceExhaustedError(absl::StrCat("cannot pin the ", source.bytes(),
                                                     " bytes of table '", source.name(),
                                                     "' in host memory: ", s.message()));
  }
  pinned->registered_ = true;
  void* device = nullptr;
  RETURN_IF_ERROR(
      check(cudaHostGetDevicePointer(&device, pinned->host(), 0), "cudaHostGetDevicePointer"));
  pinned->device_ = static_cast<const std::byte*>(device);
  stats->seconds = SecondsSince(options.clock, start);
  LogInfo("table '", source.name(), "': ", source.bytes(), " bytes read into host memory in ",
          absl::ToDoubleSeconds(read_end - start), " s, pinned and mapped for the GPU in ",
          SecondsSince(options.clock, read_end), " s");
  return pinned;
}

PinnedHostRows::~PinnedHostRows() {
  if (registered_) {
    (void)cudaHostUnregister(host());  // a destructor can't report
  }
}

size_t HostTier::DeviceBytes(int64_t rows, int64_t cache_rows, size_t row_bytes) {
  return static_cast<size_t>(cache_rows) * row_bytes + static_cast<size_t>(rows) * sizeof(int32_t);
}

HostTier::HostTier(const TableSource& source, const CudaCheck& check, const Options& options,
                   const StoreOptions& store_options)
    : check_(check),
      options_(options),
      store_options_(store_options),
      type_(source.dtype()),
      table_rows_(source.rows()),
      dim_(source.dim()),
      row_bytes_(source.row_bytes()),
      policy_({.rows = source.rows(), .capacity = options.cache_rows}) {}

absl::StatusOr<std::unique_ptr<HostTier>> HostTier::Create(const TableSource& source,
                                                           const CudaCheck& check,
                                                           const Options& options,
                                                           const StoreOptions& store_options) {
  if (options.cache_rows < 0 || options.cache_rows > std::min<int64_t>(source.rows(), INT32_MAX)) {
    return absl::InvalidArgumentError(absl::StrCat("a cache of ", options.cache_rows,
                                                   " rows for table '", source.name(), "' of ",
                                                   source.rows(), " rows"));
  }
  auto tier = std::unique_ptr<HostTier>(new HostTier(source, check, options, store_options));
  ASSIGN_OR_RETURN(tier->rows_,
                   PinnedHostRows::Read(source, check, store_options, &tier->load_stats_));
  absl::MutexLock lock(&tier->cache_mu_);
  ASSIGN_OR_RETURN(tier->cache_, kernels::DeviceBuffer<std::byte>::Allocate(
                                     static_cast<size_t>(options.cache_rows) * tier->row_bytes_));
  ASSIGN_OR_RETURN(tier->slots_,
                   kernels::DeviceBuffer<int32_t>::Allocate(static_cast<size_t>(source.rows())));
  ASSIGN_OR_RETURN(tier->misses_, kernels::DeviceBuffer<unsigned long long>::Allocate(
                                      kernels::CachedRows::kMissCounters));
  ASSIGN_OR_RETURN(tier->stream_, kernels::CudaStream::Create());
  const size_t staged = std::max<size_t>(options.max_changes, 1);
  ASSIGN_OR_RETURN(tier->staged_ids_, kernels::PinnedBuffer<int64_t>::Allocate(staged));
  ASSIGN_OR_RETURN(tier->staged_slots_, kernels::PinnedBuffer<int64_t>::Allocate(staged));
  ASSIGN_OR_RETURN(tier->staged_values_, kernels::PinnedBuffer<int32_t>::Allocate(staged));
  cudaStream_t stream = tier->stream_.get();
  RETURN_IF_ERROR(check(
      cudaMemsetAsync(tier->slots_.data(), 0xff, tier->slots_.size() * sizeof(int32_t), stream),
      "clear the cache's slots"));
  RETURN_IF_ERROR(check(cudaMemsetAsync(tier->misses_.data(), 0,
                                        tier->misses_.size() * sizeof(unsigned long long), stream),
                        "clear the miss counters"));
  RETURN_IF_ERROR(check(cudaStreamSynchronize(stream), "clear the cache"));
  // The hot rows given, in steps of max_changes.
  const std::vector<RowCachePolicy::Change> warm = tier->policy_.Warm(options.hot_ids);
  for (size_t first = 0; first < warm.size(); first += staged) {
    const size_t n = std::min(staged, warm.size() - first);
    for (size_t k = 0; k < n; ++k) {
      tier->staged_ids_.data()[k] = warm[first + k].id;
      tier->staged_slots_.data()[k] = warm[first + k].slot;
      tier->staged_values_.data()[k] = warm[first + k].slot;
    }
    RETURN_IF_ERROR(tier->Fill(n));
  }
  if (options.cache_rows > 0) {
    tier->manager_ = std::thread([t = tier.get()] { t->Manage(); });
  }
  return tier;
}

HostTier::~HostTier() {
  {
    absl::MutexLock lock(&intake_mu_);
    stop_ = true;
  }
  if (manager_.joinable()) {
    manager_.join();
  }
}

kernels::LookupProblem HostTier::Table() const {
  kernels::LookupProblem table;
  table.table = rows_->device();
  table.table_type = type_;
  table.rows = table_rows_;
  table.dim = dim_;
  table.cached = cached();
  return table;
}

EmbeddingStore::Done HostTier::Track(absl::Span<const int64_t> ids, EmbeddingStore::Done done) {
  const uint64_t ticket = BeginBatch(ids);
  return [this, ticket, n = ids.size(), done = std::move(done)](const absl::Status& s,
                                                                const StageTimes& times) mutable {
    EndBatch(ticket, n);
    done(s, times);
  };
}

kernels::CachedRows HostTier::cached() const {
  kernels::CachedRows cached;
  if (options_.cache_rows > 0) {  // else every row is read from the host rows
    cached.slots = slots_.data();
    cached.cache = cache_.data();
    cached.misses = misses_.data();
  }
  return cached;
}

uint64_t HostTier::BeginBatch(absl::Span<const int64_t> ids) {
  const uint64_t ticket = in_flight_.Begin();
  if (options_.cache_rows == 0 || ids.empty() || !intake_mu_.TryLock()) {
    return ticket;  // the manager is taking the last samples: this batch's are left out
  }
  if (intake_.size() < kMaxIntake) {
    // Every stride-th id from a first one that moves from batch to batch by a hash of the ticket
    // (by the ticket itself, batches that repeat with the stride's period, as a replayed log can,
    // would have the same ids sampled every time).
    const size_t stride =
        std::max<size_t>(1, ids.size() / std::max<size_t>(1, options_.samples_per_batch));
    const size_t first = static_cast<size_t>((ticket * 0x9e3779b97f4a7c15ull) >> 40) % stride;
    for (size_t i = first; i < ids.size(); i += stride) {
      intake_.push_back(ids[i]);
    }
  }
  intake_mu_.Unlock();
  return ticket;
}

void HostTier::EndBatch(uint64_t ticket, size_t ids) {
  lookups_.fetch_add(static_cast<int64_t>(ids), std::memory_order_relaxed);
  in_flight_.End(ticket);
}

void HostTier::Manage() {
  std::vector<int64_t> samples;
  while (true) {
    {
      absl::MutexLock lock(&intake_mu_);
      intake_mu_.AwaitWithTimeout(absl::Condition(
                                      +[](HostTier* t) ABSL_NO_THREAD_SAFETY_ANALYSIS {
                                        return t->stop_ || !t->intake_.empty();
                                      },
                                      this),
                                  absl::Milliseconds(100));
      if (stop_) {
        return;
      }
      samples.swap(intake_);
    }
    if (samples.empty()) {
      continue;
    }
    absl::MutexLock lock(&cache_mu_);
    policy_.Record(samples);
    samples.clear();
    const std::vector<RowCachePolicy::Change> changes = policy_.Plan(options_.max_changes);
    if (changes.empty()) {
      continue;
    }
    if (absl::Status s = Apply(changes); !s.ok()) {
      // The cache's picture on the device no longer matches the policy's: stop moving rows (the
      // device is most likely lost, which `check_` has reported).
      LogError(absl::StrCat("the GPU cache stops changing: ", s.message()));
      return;
    }
  }
}

absl::Status HostTier::Apply(const std::vector<RowCachePolicy::Change>& changes) {
  RETURN_IF_ERROR(check_(cudaSetDevice(check_.device()), "cudaSetDevice"));
  cudaStream_t stream = stream_.get();
  // Hide the evicted rows, then wait out every batch that may still read their slots.
  size_t evicted = 0;
  for (const RowCachePolicy::Change& c : changes) {
    if (c.evicted >= 0) {
      staged_ids_.data()[evicted] = c.evicted;
      staged_values_.data()[evicted] = -1;
      ++evicted;
    }
  }
  if (evicted > 0) {
    RETURN_IF_ERROR(kernels::LaunchScatterRows(
        reinterpret_cast<std::byte*>(slots_.data()), sizeof(int32_t), staged_ids_.data(),
        reinterpret_cast<const std::byte*>(staged_values_.data()), static_cast<int64_t>(evicted),
        stream));
    RETURN_IF_ERROR(check_(cudaStreamSynchronize(stream), "hide evicted rows"));
    in_flight_.WaitForEarlier();
  }
  for (size_t k = 0; k < changes.size(); ++k) {
    staged_ids_.data()[k] = changes[k].id;
    staged_slots_.data()[k] = changes[k].slot;
    staged_values_.data()[k] = changes[k].slot;
  }
  return Fill(changes.size());
}

absl::Status HostTier::Fill(size_t n) {
  if (n == 0) {
    return absl::OkStatus();
  }
  cudaStream_t stream = stream_.get();
  RETURN_IF_ERROR(kernels::LaunchCopyRows(cache_.data(), staged_slots_.data(), rows_->device(),
                                          staged_ids_.data(), row_bytes_, static_cast<int64_t>(n),
                                          stream));
  RETURN_IF_ERROR(check_(cudaStreamSynchronize(stream), "copy rows into the cache"));
  // A batch that was running while the rows were copied may hold stale lines of the slots in its
  // SMs' caches (rows narrower than a cache line share lines with their neighbours): only batches
  // begun after the copy may read the slots, so wait the running ones out before showing them.
  in_flight_.WaitForEarlier();
  RETURN_IF_ERROR(kernels::LaunchScatterRows(
      reinterpret_cast<std::byte*>(slots_.data()), sizeof(int32_t), staged_ids_.data(),
      reinterpret_cast<const std::byte*>(staged_values_.data()), static_cast<int64_t>(n), stream));
  return check_(cudaStreamSynchronize(stream), "show cached rows");
}

absl::Status HostTier::WriteRows(absl::Span<const int64_t> ids, const std::byte* rows) {
  absl::MutexLock lock(&cache_mu_);
  size_t cached = 0;
  auto copy_cached = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(cache_mu_) -> absl::Status {
    if (cached == 0) {
      return absl::OkStatus();
    }
    RETURN_IF_ERROR(check_(cudaSetDevice(check_.device()), "cudaSetDevice"));
    RETURN_IF_ERROR(kernels::LaunchCopyRows(cache_.data(), staged_slots_.data(), rows_->device(),
                                            staged_ids_.data(), row_bytes_,
                                            static_cast<int64_t>(cached), stream_.get()));
    cached = 0;
    return check_(cudaStreamSynchronize(stream_.get()), "write updated rows into the cache");
  };
  for (size_t k = 0; k < ids.size(); ++k) {
    std::memcpy(rows_->host() + static_cast<size_t>(ids[k]) * row_bytes_, rows + k * row_bytes_,
                row_bytes_);
    if (const int32_t slot = policy_.slot_of(ids[k]); slot >= 0) {
      staged_ids_.data()[cached] = ids[k];
      staged_slots_.data()[cached] = slot;
      if (++cached == staged_ids_.size()) {
        RETURN_IF_ERROR(copy_cached());
      }
    }
  }
  return copy_cached();
}

absl::Status HostTier::Write(const StagingBlock& block, int64_t count, size_t rows_offset) {
  return WriteRows(absl::MakeConstSpan(reinterpret_cast<const int64_t*>(block.host.data()),
                                       static_cast<size_t>(count)),
                   block.host.data() + rows_offset);
}

absl::Status HostTier::Read(size_t offset, absl::Span<std::byte> out) const {
  std::memcpy(out.data(), rows_->host() + offset, out.size());
  return absl::OkStatus();
}

namespace {

// The next version's rows, in pinned host memory.
using TieredPreparedTable = PreparedTableOf<std::unique_ptr<PinnedHostRows>>;

}  // namespace

absl::StatusOr<std::unique_ptr<PreparedTable>> HostTier::Prepare(
    const TableSource& source, const EmbeddingStore* maker) const {
  LoadStats stats;
  ASSIGN_OR_RETURN(std::unique_ptr<PinnedHostRows> rows,
                   PinnedHostRows::Read(source, check_, store_options_, &stats));
  return std::make_unique<TieredPreparedTable>(maker, std::move(rows));
}

absl::Status HostTier::Swap(PreparedTable& table, const EmbeddingStore* maker) {
  absl::MutexLock lock(&cache_mu_);
  std::swap(rows_, MadeBy<TieredPreparedTable>(maker, table)->rows);
  policy_.Clear();
  RETURN_IF_ERROR(check_(cudaSetDevice(check_.device()), "cudaSetDevice"));
  RETURN_IF_ERROR(
      check_(cudaMemsetAsync(slots_.data(), 0xff, slots_.size() * sizeof(int32_t), stream_.get()),
             "empty the cache"));
  return check_(cudaStreamSynchronize(stream_.get()), "empty the cache");
}

CacheStats HostTier::stats() const {
  CacheStats stats;
  stats.capacity_rows = options_.cache_rows;
  stats.row_bytes = row_bytes_;
  stats.lookups = lookups_.load(std::memory_order_relaxed);
  if (options_.cache_rows == 0) {
    stats.misses = stats.lookups;
    return stats;
  }
  {
    absl::MutexLock lock(&cache_mu_);
    stats.cached_rows = policy_.cached_rows();
  }
  unsigned long long counters[kernels::CachedRows::kMissCounters] = {};
  if (cudaSetDevice(check_.device()) == cudaSuccess &&
      cudaMemcpy(counters, misses_.data(), sizeof(counters), cudaMemcpyDeviceToHost) ==
          cudaSuccess) {
    for (const unsigned long long c : counters) {
      stats.misses += static_cast<int64_t>(c);
    }
  }
  return stats;
}

}  // namespace emb::service
