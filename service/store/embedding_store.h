// EmbeddingStore: one table resident on one device, and the gather over it.
//
// The service reaches every backend through this interface: CpuStore (always built) and GpuStore
// (where CUDA is found) implement it. What a store holds is one TableInfo, set at construction.
// Thread-safe. LookUp may block while the device is busy
// (that is the batcher's back-pressure); it is called from batcher threads and, for an
// asynchronous store whose batcher is idle, from the gRPC thread that brought the request.
#ifndef EMB_SERVICE_STORE_EMBEDDING_STORE_H_
#define EMB_SERVICE_STORE_EMBEDDING_STORE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "kernels/data_type.h"
#include "service/ids/row_range.h"
#include "service/tables/table_source.h"

namespace emb::service {

// How long the stages of one batch took, in seconds; 0 where the device has no such stage.
struct StageTimes {
  double copy_in = 0;
  double gather = 0;
  double copy_out = 0;
  // The host's copies of rows from the store's own buffer into the callers' buffers; 0 where the
  // gather or the copy engines wrote every row straight into them.
  double host_copy = 0;
};

// How a table on several devices is laid out (MultiDeviceStore).
enum class Placement {
  kOneDevice,   // the table on one device
  kReplicated,  // the whole table on every device; each batch served by one of them
  kRowSharded,  // the rows split into one block a device; each batch's ids split by owner
};
// "one device", "replicas", "rows": as --placement and the logs name them.
const char* PlacementName(Placement placement);

// One device's part of a table on several devices.
struct DevicePart {
  std::string device;       // "cpu" or "cuda:N"
  RowRange ids = {};        // the part's rows, by their global ids
  size_t device_bytes = 0;  // GPU memory the part took (0 on the CPU)
  bool host_tier = false;   // the part's rows in host memory with a GPU cache
};

// What a store holds: the table and where it lives.
struct TableInfo {
  std::string name;
  int64_t rows = 0;
  int64_t dim = 0;
  DataType dtype = DataType::kFloat32;
  std::string device;  // "cpu" or "cuda:N"
  // On a GPU: the rows are in host memory, with a cache of cache_rows of them on the device
  // (a table larger than the GPU memory it may use); false: all rows on the device.
  bool host_tier = false;
  int64_t cache_rows = 0;
  // GPU memory the store took (its rows or its cache and slots, and its batch buffers); 0 on the
  // CPU.
  size_t device_bytes = 0;
  // The ids the store answers, and their rows in it (ids.count() is rows): the whole table's, or
  // a shard's (--shard, or the table's shard= option; shard is nullopt for a whole table).
  RowRange ids = {};
  std::optional<ShardSpec> shard = std::nullopt;
  // A table on several devices: how, and each device's part (device above lists them all, and
  // device_bytes, host_tier and cache_rows are their totals); empty on one device.
  Placement placement = Placement::kOneDevice;
  std::vector<DevicePart> parts = {};
  // Bytes of the table's rows.
  size_t bytes() const { return static_cast<size_t>(rows) * RowBytes(dtype, dim); }

  // A store's info before placement: the source's name, rows, shape and shard, on `device`.
  static TableInfo Of(const TableSource& source, std::string device) {
    TableInfo info{source.name(), source.rows(), source.dim(), source.dtype(), std::move(device)};
    info.ids = source.ids();
    info.shard = source.shard();
    return info;
  }
};

// What a host tier's GPU cache holds and has served; counts since start-up.
struct CacheStats {
  int64_t capacity_rows = 0;
  int64_t cached_rows = 0;
  size_t row_bytes = 0;
  int64_t lookups = 0;  // rows looked up in batches that have ended
  int64_t misses = 0;   // rows read from host memory, of batches ended or running
};

// One caller's share of a batch's answer: whole rows of the answer type, in id order. `device` is
// the same memory as the store's device sees it (pinned memory mapped into its address space, from
// the device's AnswerBufferPool), so that the device writes the rows there itself; nullptr where
// the device cannot see it (ordinary host memory). A span in device memory only (OnDevice: a row
// split's staging rows on a GPU, MultiDeviceStore) has no host address; `host` then gives only its
// size, and only a GPU store writes it (a copy from any device: the addresses are unified).
struct AnswerSpan {
  absl::Span<std::byte> host;
  std::byte* device = nullptr;

  static AnswerSpan OnDevice(std::byte* device, size_t bytes) {
    return AnswerSpan{absl::Span<std::byte>(nullptr, bytes), device};
  }
  bool device_only() const { return host.data() == nullptr && device != nullptr; }
};

// The pooled part of a batch: bag b is ids[offsets[b] .. offsets[b + 1]) of the batch's ids, and
// the bags come after the ids answered one row each (offsets[0] of them), so offsets.back() is
// the batch's last id. A bag's row is the sum of its rows (each times its weight, where `weights`
// is given), times its scale (where `scales` is given: a mean's 1 / length), accumulated in
// float32 and rounded once to the answer type (kernels::CpuPooledGather).
struct BatchBags {
  absl::Span<const int64_t> offsets;  // bags + 1; empty: nothing is pooled
  absl::Span<const float> weights;    // empty, or one per id of the batch (the pooled ones read)
  absl::Span<const float> scales;     // empty, or one per bag
  size_t count() const { return offsets.empty() ? 0 : offsets.size() - 1; }
};

// One batch handed to a store.
struct LookUpBatch {
  absl::Span<const int64_t> ids;
  DataType out_type = DataType::kFloat32;
  // Where the answer's rows go, one span per caller in order: first a row per id for the ids
  // before the bags, then a row per bag.
  absl::Span<const AnswerSpan> outs;
  BatchBags bags;

  // The ids answered one row each: all of them when nothing is pooled.
  size_t plain_ids() const {
    return bags.offsets.empty() ? ids.size() : static_cast<size_t>(bags.offsets.front());
  }
  size_t answer_rows() const { return plain_ids() + bags.count(); }
};

class EmbeddingStore;

// Rows of an update made ready by EmbeddingStore::PrepareRows, to be written by WriteRows of the
// same store. Each store's own subclass holds them (host or device memory); the store that made
// them (`maker`) reads them as that subclass (MadeBy).
class PreparedRows {
 public:
  virtual ~PreparedRows() = default;
  // Distinct ids: the rows WriteRows writes.
  int64_t rows() const { return rows_; }
  const EmbeddingStore* maker() const { return maker_; }

 protected:
  PreparedRows(const EmbeddingStore* maker, int64_t rows) : maker_(maker), rows_(rows) {}

 private:
  const EmbeddingStore* const maker_;
  const int64_t rows_;
};

// OK when `source` has the served table's rows, dim and dtype; else FAILED_PRECONDITION naming
// both shapes (a version of another shape needs a restart: requests were checked against the
// served one).
absl::Status CheckSameShape(const TableInfo& served, int64_t rows, int64_t dim, DataType dtype,
                            absl::string_view origin);

// The index of each distinct id's last occurrence in `ids`, in the order of those occurrences:
// the rows an update writes when an id is given twice (the last row wins).
std::vector<size_t> LastOccurrences(absl::Span<const int64_t> ids);

// Writes one row of an update (dim elements of the value type `rows_type`) as a row of the
// table's type, converted as lookups convert or quantized (kernels/quantize_rows.h).
// INVALID_ARGUMENT naming the table and the row (`index`, its place in the message) for a row a
// quantized table cannot hold (NaN, infinity, or past float16 for int4).
absl::Status EncodeRowOfUpdate(const std::byte* row, DataType rows_type, const TableInfo& table,
                               std::byte* out, size_t index);

// Another version of a store's table, loaded beside the served one by PrepareTable, to take its
// place (SwapTable); after the swap it holds the old rows, freed with it. As PreparedRows, each
// store's own subclass, read as such by the store that made it.
class PreparedTable {
 public:
  virtual ~PreparedTable() = default;
  const EmbeddingStore* maker() const { return maker_; }

 protected:
  explicit PreparedTable(const EmbeddingStore* maker) : maker_(maker) {}

 private:
  const EmbeddingStore* const maker_;
};

// A store's prepared version held as one value of the store's own type (its rows in memory of its
// kind, or its parts' prepared versions): the subclass most stores make.
template <typename Rows>
class PreparedTableOf final : public PreparedTable {
 public:
  PreparedTableOf(const EmbeddingStore* maker, Rows rows)
      : PreparedTable(maker), rows(std::move(rows)) {}
  Rows rows;
};

// `prepared` (a PreparedRows or PreparedTable) as the subclass T that `store` makes, or nullptr
// when another store made it. A store makes one subclass of each (for a given residence), so
// this is the only check the cast needs.
template <typename T, typename Prepared>
T* MadeBy(const EmbeddingStore* store, Prepared& prepared) {
  return prepared.maker() == store ? static_cast<T*>(&prepared) : nullptr;
}

class EmbeddingStore {
 public:
  // Where a batch's rows go: one span per caller, in id order; together they hold ids.size()
  // rows.
  using RowsOut = absl::Span<const AnswerSpan>;
  // Called exactly once per LookUp, on some store or batcher thread; on OK the rows are in `outs`.
  using Done = absl::AnyInvocable<void(const absl::Status& status, const StageTimes& times)>;

  virtual ~EmbeddingStore() = default;

  const TableInfo& info() const { return info_; }
  // The most ids one LookUp may carry (the size the store's buffers were made for).
  int64_t max_batch_ids() const { return max_batch_ids_; }
  // True where LookUp only enqueues the gather and `done` runs later on a store thread (GpuStore),
  // so that calling LookUp never waits for a gather; false where LookUp does the gather before it
  // returns (CpuStore).
  virtual bool asynchronous() const { return false; }
  // Batches that may be in flight at once without LookUp blocking (GpuStore: its slots).
  virtual int max_inflight_batches() const { return 1; }
  // For a table in a host tier (info().host_tier): its cache's figures; else nullopt.
  virtual std::optional<CacheStats> cache_stats() const { return std::nullopt; }

  // Gathers rows ids[i], converted to `out_type`, into `outs`, and pools the batch's bags. Ids
  // and bags were checked by the caller (ids in [0, info().rows), offsets never decreasing), and
  // ids and answer rows number at most max_batch_ids(); the spans of `batch` and the memory they
  // point to must stay valid until `done` runs (`batch` itself need not). Errors: INTERNAL with
  // the CUDA error's name for a device failure, or for `outs` that do not hold the rows (see
  // CheckRowsOut).
  virtual void LookUp(const LookUpBatch& batch, Done done) = 0;
  // A batch with nothing pooled.
  void LookUp(absl::Span<const int64_t> ids, DataType out_type, RowsOut outs, Done done) {
    LookUpBatch batch;
    batch.ids = ids;
    batch.out_type = out_type;
    batch.outs = outs;
    LookUp(batch, std::move(done));
  }

  // Row updates come in two steps, so that the slow part runs while batches do:
  //   PrepareRows, on any thread at any time: `rows` (ids.size() rows of info().dim elements of
  //     `rows_type`, little-endian) converted to the table's type as LookUp converts, each id once
  //     with its last row, and, for a GPU store, already in device memory. Ids were checked by
  //     the caller (all in [0, info().rows)). `ids` and `rows` need not outlive the call.
  //   WriteRows, at a batch boundary: the caller guarantees that no LookUp is in flight and that
  //     none starts until it returns (the batcher's barrier), so that no answer holds part of an
  //     update. Returns once every later LookUp reads the rows.
  // Errors: INTERNAL with the CUDA error's name for a device failure (WriteRows: the table is
  // then as before, or the device is lost); UNIMPLEMENTED for a store that takes no updates.
  virtual absl::StatusOr<std::unique_ptr<PreparedRows>> PrepareRows(
      absl::Span<const int64_t> ids, DataType rows_type, absl::Span<const std::byte> rows) {
    (void)ids;
    (void)rows_type;
    (void)rows;
    return absl::UnimplementedError(
        absl::StrCat("table '", info_.name, "' does not take row updates"));
  }
  virtual absl::Status WriteRows(PreparedRows& rows) {
    (void)rows;
    return absl::UnimplementedError(
        absl::StrCat("table '", info_.name, "' does not take row updates"));
  }
  // Copies the table's bytes [offset, offset + out.size()) (rows of the table's type, row-major)
  // into host memory. Runs beside LookUps (it only reads); the caller keeps updates away for a
  // consistent copy (TableWriter::WithUpdatesPaused). OUT_OF_RANGE past the table; INTERNAL with
  // the CUDA error's name for a device failure.
  virtual absl::Status ReadRows(size_t offset, absl::Span<std::byte> out) const {
    (void)offset;
    (void)out;
    return absl::UnimplementedError(absl::StrCat("table '", info_.name, "' cannot be read back"));
  }

  // Version swaps, in two steps as updates:
  //   PrepareTable, on any thread while batches run: `source`'s rows loaded where the store
  //     keeps its table, beside the served rows. FAILED_PRECONDITION when `source` differs from the
  //     served table in rows, dim or dtype, or when the device cannot hold both copies (naming the
  //     bytes needed and free); the errors of the store's load otherwise.
  //   SwapTable, at a batch boundary (as WriteRows): the prepared rows are served from now on; the
  //     old ones move into `table`. INTERNAL for a table another store prepared (nothing
  //     swapped), or a device failure (a lost device).
  virtual absl::StatusOr<std::unique_ptr<PreparedTable>> PrepareTable(const TableSource& source) {
    (void)source;
    return absl::UnimplementedError(
        absl::StrCat("table '", info_.name, "' cannot load another version"));
  }
  virtual absl::Status SwapTable(PreparedTable& table) {
    (void)table;
    return absl::UnimplementedError(
        absl::StrCat("table '", info_.name, "' cannot load another version"));
  }

  // Both steps at once (the caller keeps the barrier); the distinct rows written.
  absl::StatusOr<int64_t> UpdateRows(absl::Span<const int64_t> ids, DataType rows_type,
                                     absl::Span<const std::byte> rows) {
    absl::StatusOr<std::unique_ptr<PreparedRows>> prepared = PrepareRows(ids, rows_type, rows);
    if (!prepared.ok()) {
      return prepared.status();
    }
    if (absl::Status s = WriteRows(**prepared); !s.ok()) {
      return s;
    }
    return (*prepared)->rows();
  }

 protected:
  // OK when bytes [offset, offset + size) lie in the table; else ReadRows's OUT_OF_RANGE.
  absl::Status CheckReadRange(size_t offset, size_t size) const {
    if (offset > info_.bytes() || size > info_.bytes() - offset) {
      return absl::OutOfRangeError(
          absl::StrCat("ReadRows past the ", info_.bytes(), " bytes of table '", info_.name, "'"));
    }
    return absl::OkStatus();
  }

  EmbeddingStore(TableInfo info, int64_t max_batch_ids)
      : info_(std::move(info)), max_batch_ids_(max_batch_ids) {}
  // While the store is made: where the table lives (a host tier with a cache of `cache_rows`
  // rows, or not) and the GPU memory it took.
  void set_placement(bool host_tier, int64_t cache_rows, size_t device_bytes) {
    info_.host_tier = host_tier;
    info_.cache_rows = cache_rows;
    info_.device_bytes = device_bytes;
  }

 private:
  TableInfo info_;  // set at construction (and by set_placement while the store is made)
  const int64_t max_batch_ids_;
};

// OK if `outs` are whole rows of `row_bytes` that together hold `ids` rows (a batch's answer
// rows), and none holds both rows of single ids and pooled rows (the first `plain` rows); else
// INTERNAL, saying which span is off.
inline absl::Status CheckRowsOut(size_t ids, size_t row_bytes, EmbeddingStore::RowsOut outs,
                                 size_t plain = 0) {
  size_t rows = 0;
  for (size_t i = 0; i < outs.size(); ++i) {
    const size_t bytes = outs[i].host.size();
    if (row_bytes == 0 || bytes % row_bytes != 0) {
      return absl::InternalError(absl::StrCat("answer span ", i, " holds ", bytes,
                                              " bytes, not whole rows of ", row_bytes));
    }
    const size_t first = rows;
    rows += bytes / row_bytes;
    if (first < plain && rows > plain) {
      return absl::InternalError(absl::StrCat("answer span ", i, " holds rows ", first, " to ",
                                              rows, ", across the first pooled row ", plain));
    }
  }
  if (rows != ids) {
    return absl::InternalError(
        absl::StrCat("the answer spans hold ", rows, " rows for ", ids, " ids"));
  }
  return absl::OkStatus();
}

}  // namespace emb::service

#endif  // EMB_SERVICE_STORE_EMBEDDING_STORE_H_
