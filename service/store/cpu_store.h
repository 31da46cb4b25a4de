// CpuStore: a table in host memory (read once from its file into huge pages), gathered on the
// calling thread. Thread-safe: LookUp only reads the table and writes its callers' spans;
// UpdateRows writes the table while no LookUp runs (the batcher's barrier).
#ifndef EMB_SERVICE_STORE_CPU_STORE_H_
#define EMB_SERVICE_STORE_CPU_STORE_H_

#include <memory>

#include "absl/status/statusor.h"
#include "service/common/clock.h"
#include "service/store/embedding_store.h"
#include "service/store/store_options.h"
#include "service/tables/table_source.h"

namespace emb::service {

class CpuStore final : public EmbeddingStore {
 public:
  // Reads (or, for a demo table, generates) the rows into host memory; takes options.max_batch_ids
  // and options.clock. Errors from TableSource::ReadAll().
  static absl::StatusOr<std::unique_ptr<CpuStore>> Create(const TableSource& source,
                                                          const StoreOptions& options);
  // A store over `rows` that were not read from a table source (a row split's staging rows,
  // MultiDeviceStore), described by `info`.
  static std::unique_ptr<CpuStore> CreateOver(TableInfo info, std::unique_ptr<HugePageRows> rows,
                                              const StoreOptions& options);

  // Gathers into `outs` on the calling thread and calls `done` before returning.
  using EmbeddingStore::LookUp;
  void LookUp(const LookUpBatch& batch, Done done) override;
  // Prepared rows are host memory in the table's type; WriteRows copies them into the table.
  absl::StatusOr<std::unique_ptr<PreparedRows>> PrepareRows(
      absl::Span<const int64_t> ids, DataType rows_type, absl::Span<const std::byte> rows) override;
  absl::Status WriteRows(PreparedRows& rows) override;
  absl::Status ReadRows(size_t offset, absl::Span<std::byte> out) const override;
  // A prepared table is the version's rows read into host memory beside the served ones.
  absl::StatusOr<std::unique_ptr<PreparedTable>> PrepareTable(const TableSource& source) override;
  absl::Status SwapTable(PreparedTable& table) override;

 private:
  CpuStore(TableInfo info, std::unique_ptr<HugePageRows> rows, const StoreOptions& options);

  Clock* const clock_;
  std::unique_ptr<HugePageRows> data_;  // replaced only by SwapTable, at a batch boundary
};

}  // namespace emb::service

#endif  // EMB_SERVICE_STORE_CPU_STORE_H_
