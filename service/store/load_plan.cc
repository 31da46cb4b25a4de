#include "service/store/load_plan.h"

#include <algorithm>
#include <system_error>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"

namespace emb::service {
namespace {

double Rate(size_t bytes, double seconds) {
  return seconds > 0 ? static_cast<double>(bytes) / seconds : 0.0;
}

}  // namespace

size_t LoadPlan::ChunkSize(size_t i) const {
  const size_t offset = ChunkOffset(i);
  return offset >= table_bytes ? 0 : std::min(chunk_bytes, table_bytes - offset);
}

LoadPlan PlanLoad(size_t table_bytes, int readers, size_t chunk_bytes, unsigned hardware_threads) {
  LoadPlan plan;
  plan.table_bytes = table_bytes;
  if (table_bytes == 0) {
    return plan;
  }
  if (chunk_bytes == 0) {
    chunk_bytes = kDefaultLoadChunkBytes;
  }
  plan.chunk_bytes =
      std::min({chunk_bytes, table_bytes,
                kMaxLoadStagingBytes / static_cast<size_t>(kStagingBuffersPerReader)});
  plan.chunks = (table_bytes - 1) / plan.chunk_bytes + 1;
  if (readers <= 0) {
    readers = std::min(kMaxDefaultLoadReaders, std::max(1, static_cast<int>(hardware_threads)));
  }
  const size_t fit =
      kMaxLoadStagingBytes / (plan.chunk_bytes * static_cast<size_t>(kStagingBuffersPerReader));
  const size_t capped = std::min({static_cast<size_t>(readers), plan.chunks, fit});
  plan.readers = static_cast<int>(std::max<size_t>(1, capped));
  return plan;
}

std::optional<size_t> ChunkCursor::Next() {
  if (stopped_.load(std::memory_order_relaxed)) {
    return std::nullopt;
  }
  // Never moves past chunks_, so that a long load cannot wrap the counter.
  size_t i = next_.load(std::memory_order_relaxed);
  while (i < chunks_ && !next_.compare_exchange_weak(i, i + 1, std::memory_order_relaxed)) {
  }
  if (i >= chunks_) {
    return std::nullopt;
  }
  return i;
}

double BusySeconds(std::vector<std::pair<double, double>> intervals) {
  std::sort(intervals.begin(), intervals.end());
  double busy = 0;
  double open_start = 0;
  double open_end = 0;
  bool open = false;
  for (const auto& [start, end] : intervals) {
    if (end <= start) {
      continue;
    }
    if (open && start <= open_end) {
      open_end = std::max(open_end, end);
      continue;
    }
    if (open) {
      busy += open_end - open_start;
    }
    open = true;
    open_start = start;
    open_end = end;
  }
  return open ? busy + (open_end - open_start) : busy;
}

absl::StatusOr<LoadStats> ReadTable(const TableSource& source, const LoadPlan& plan, std::byte* dst,
                                    Clock* clock) {
  const absl::Time start = clock->Now();
  ChunkCursor cursor(plan.chunks);
  absl::Mutex mu;
  absl::Status failure;                          // guarded by mu
  std::vector<std::pair<double, double>> reads;  // guarded by mu
  auto fail = [&](absl::Status s) {
    cursor.Stop();
    absl::MutexLock lock(&mu);
    if (failure.ok()) {
      failure = std::move(s);
    }
  };
  auto read = [&] {
    while (std::optional<size_t> chunk = cursor.Next()) {
      const size_t offset = plan.ChunkOffset(*chunk);
      const double began = SecondsSince(clock, start);
      absl::Status s = source.Read(offset, absl::MakeSpan(dst + offset, plan.ChunkSize(*chunk)));
      const double ended = SecondsSince(clock, start);
      if (!s.ok()) {
        fail(std::move(s));
        return;
      }
      absl::MutexLock lock(&mu);
      reads.emplace_back(began, ended);
    }
  };
  source.AdviseSequential();
  std::vector<std::thread> threads;
  for (int r = 0; r < plan.readers; ++r) {
    try {
      threads.emplace_back(read);
    } catch (const std::system_error& e) {  // the readers already started end and are joined
      fail(absl::ResourceExhaustedError(
          absl::StrCat("cannot start a thread to read table '", source.name(), "': ", e.what())));
      break;
    }
  }
  for (std::thread& t : threads) {
    t.join();
  }
  absl::MutexLock lock(&mu);
  if (!failure.ok()) {
    return failure;
  }
  LoadStats stats;
  stats.bytes = plan.table_bytes;
  stats.readers = plan.readers;
  stats.chunk_bytes = plan.chunk_bytes;
  stats.read_seconds = BusySeconds(std::move(reads));
  stats.seconds = SecondsSince(clock, start);
  return stats;
}

double LoadStats::rate() const { return Rate(bytes, seconds); }
double LoadStats::read_rate() const { return Rate(bytes, read_seconds); }
double LoadStats::copy_rate() const { return Rate(bytes, copy_seconds); }

std::string LoadSummary(absl::string_view table, const LoadStats& stats) {
  return absl::StrFormat(
      "table '%s' upload: %d bytes in %.3f s (%.2f GB/s): reads %.2f GB/s over %d threads, "
      "copies %.2f GB/s, staging %d x %.3g MiB",
      table, stats.bytes, stats.seconds, stats.rate() / 1e9, stats.read_rate() / 1e9, stats.readers,
      stats.copy_rate() / 1e9, stats.readers * kStagingBuffersPerReader,
      static_cast<double>(stats.chunk_bytes) / (1 << 20));
}

}  // namespace emb::service
