// How GpuStore::Load splits a table into chunks for its reader threads, and the host-side pieces
// of that load that need no GPU: the plan (readers, chunk size, the staging bound), a cursor that
// hands the chunks out in file order, the busy time of overlapping reads, and the summary line.
#ifndef EMB_SERVICE_STORE_LOAD_PLAN_H_
#define EMB_SERVICE_STORE_LOAD_PLAN_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "service/common/clock.h"
#include "service/tables/table_source.h"

namespace emb::service {

// Staging buffers per reader: one being read into while the other is copied to the device.
inline constexpr int kStagingBuffersPerReader = 2;
// The pinned staging of one load never exceeds this, whatever the table's size.
inline constexpr size_t kMaxLoadStagingBytes = size_t{1} << 30;
// Defaults for StoreOptions::load_readers == 0 and load_chunk_bytes == 0.
inline constexpr int kMaxDefaultLoadReaders = 8;
inline constexpr size_t kDefaultLoadChunkBytes = size_t{16} << 20;

// Chunk i covers table bytes [ChunkOffset(i), ChunkOffset(i) + ChunkSize(i)); every chunk but
// the last has chunk_bytes bytes.
struct LoadPlan {
  size_t table_bytes = 0;
  size_t chunk_bytes = 0;
  size_t chunks = 0;
  int readers = 0;

  size_t ChunkOffset(size_t i) const { return i * chunk_bytes; }
  size_t ChunkSize(size_t i) const;
  size_t staging_bytes() const {
    return chunk_bytes * kStagingBuffersPerReader * static_cast<size_t>(readers);
  }
};

// The plan for a table of `table_bytes`. `readers` <= 0 picks min(8, hardware_threads) (1 when
// that is unknown, 0); `chunk_bytes` == 0 picks 16 MiB. The chunk is cut to the table, and to half
// the staging bound; readers are cut to the chunks there are and to the staging bound, but never
// below 1 while there is something to read. An empty table gets no chunks and no readers.
LoadPlan PlanLoad(size_t table_bytes, int readers, size_t chunk_bytes, unsigned hardware_threads);

// Hands out chunk indices 0, 1, ... once each, in increasing order across all callers, until
// they run out or Stop() is called. Thread-safe.
class ChunkCursor {
 public:
  explicit ChunkCursor(size_t chunks) : chunks_(chunks) {}

  // The next chunk, or nullopt once every chunk was handed out or after Stop().
  std::optional<size_t> Next();
  // Later Next() calls return nullopt; chunks already handed out are unaffected.
  void Stop() { stopped_.store(true, std::memory_order_relaxed); }

 private:
  const size_t chunks_;
  std::atomic<size_t> next_{0};
  std::atomic<bool> stopped_{false};
};

// The length of the union of the [start, end) intervals: the time during which at least one was
// open. Empty and reversed intervals count nothing.
double BusySeconds(std::vector<std::pair<double, double>> intervals);

// What one table upload took, for the start-up log and the load benchmark.
struct LoadStats {
  size_t bytes = 0;
  int readers = 0;
  size_t chunk_bytes = 0;
  double seconds = 0;       // the whole load: device and staging allocation, reads, copies
  double read_seconds = 0;  // while at least one reader was inside a read
  double copy_seconds = 0;  // the copies' own time on the device (CUDA events), summed

  // Bytes per second over each of the times above; 0 where the time is 0.
  double rate() const;
  double read_rate() const;
  double copy_rate() const;
};

// Reads `source`'s rows into host memory at `dst` (source.bytes() bytes): plan.readers threads
// take plan.chunk_bytes chunks in file order and read each straight into its place (no staging).
// For a table kept in host memory (a GPU's host tier). Returns once every reader has ended, with
// the stats (copy_seconds 0; `seconds` the whole read). Errors: the first failure, a read's
// (naming the file and offset) or RESOURCE_EXHAUSTED when a thread cannot start.
absl::StatusOr<LoadStats> ReadTable(const TableSource& source, const LoadPlan& plan, std::byte* dst,
                                    Clock* clock);

// "table 'x' upload: 4294967296 bytes in 0.410 s (10.48 GB/s): reads 12.30 GB/s over 8
// threads, copies 25.10 GB/s, staging 16 x 16 MiB" (GB = 1e9 bytes).
std::string LoadSummary(absl::string_view table, const LoadStats& stats);

}  // namespace emb::service

#endif  // EMB_SERVICE_STORE_LOAD_PLAN_H_
