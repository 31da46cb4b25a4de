// EmbeddingStore: one table resident on one device, and the gather over it.
//
// The service reaches every backend through this interface: CpuStore (always built) and GpuStore
// (where CUDA is found) implement it. What a store holds is one TableInfo, set at construction;
// it and the other values a store and its callers exchange are in store_types.h.
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
#include "service/store/store_types.h"
#include "service/tables/table_source.h"

namespace emb::service {

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

// An update as a store writes it (PrepareRows): its distinct ids (of an id given twice, the last
// row wins) and, for each, its row encoded in the table's type, converted as lookups convert or
// quantized (kernels/quantize_rows.h).
class EncodedUpdate {
 public:
  // INTERNAL when `rows` is not one row of `rows_type` per id.
  static absl::StatusOr<EncodedUpdate> Plan(const TableInfo& table, absl::Span<const int64_t> ids,
                                            DataType rows_type, absl::Span<const std::byte> rows);
  // The distinct ids.
  size_t count() const { return keep_.size(); }
  // Writes id k to ids_out[k] and its row to rows_out + k * RowBytes(table), for each k <
  // count(). INVALID_ARGUMENT naming the table and the row (its place in the message) for a row
  // a quantized table cannot hold (NaN, infinity, or past float16 for int4).
  absl::Status Write(int64_t* ids_out, std::byte* rows_out) const;

 private:
  EncodedUpdate(const TableInfo& table, absl::Span<const int64_t> ids, DataType rows_type,
                absl::Span<const std::byte> rows)
      : table_(table), ids_(ids), rows_type_(rows_type), rows_(rows) {}

  const TableInfo& table_;
  absl::Span<const int64_t> ids_;
  DataType rows_type_;
  absl::Span<const std::byte> rows_;
  std::vector<size_t> keep_;
};

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

}  // namespace emb::service

#endif  // EMB_SERVICE_STORE_EMBEDDING_STORE_H_
