// MultiDeviceStore: one table over several devices (--device=cuda:0,cuda:1), behind the
// EmbeddingStore interface, so that the batcher and the service treat it as any other store.
// It holds one store a device (its parts), each made by the factory for its device:
//   replicas (Placement::kReplicated): every part holds the whole table. Each batch goes to the
//     part with the fewest batches in flight (ties in turn), so the devices share the load.
//     Updates and versions go to every part.
//   rows (Placement::kRowSharded): part k holds block k of the rows (ShardSpec's arithmetic: the
//     rows in blocks of ceil(rows / parts)), so a table larger than one device is served. A
//     batch's ids are split by owner, every part gathers its own ids at once, and the rows are put
//     in the callers' answers on the host as the last part ends. A batch with bags gathers its
//     rows as float32 (the table's values, exactly) and pools them on the host in id order:
//     kernels::CpuPooledGather's arithmetic, so the answer is bit for bit a single device's.
// Thread-safe as the parts are.
#ifndef EMB_SERVICE_STORE_MULTI_DEVICE_STORE_H_
#define EMB_SERVICE_STORE_MULTI_DEVICE_STORE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "service/store/embedding_store.h"
#include "service/tables/table_source.h"

namespace emb::service {

class MultiDeviceStore final : public EmbeddingStore {
 public:
  // Makes the part of `source` for device `part` (a store over `source` or a slice of it).
  using PartFactory =
      std::function<absl::StatusOr<std::unique_ptr<EmbeddingStore>>(const TableSource&, int part)>;
  // Called as each part ends its share of a batch: which part, its stage times, and how many ids
  // it gathered (per-device metrics).
  using PartObserver = std::function<void(int part, const StageTimes& times, size_t ids)>;

  // Makes `devices` parts of `source` with `make_part`, placed as `placement` (kReplicated or
  // kRowSharded). `devices` names each part's device for TableInfo. Errors: the parts' own, and
  // INVALID_ARGUMENT for fewer than two devices or a row split that leaves a device no rows.
  static absl::StatusOr<std::unique_ptr<MultiDeviceStore>> Create(
      const TableSource& source, Placement placement, const std::vector<std::string>& devices,
      const PartFactory& make_part);

  // Set before the first LookUp.
  void set_part_observer(PartObserver observer) { observer_ = std::move(observer); }
  // The part that holds `id` (a row of this store, from 0) for rows; 0 for replicas.
  int OwnerOf(int64_t id) const;

  using EmbeddingStore::LookUp;
  void LookUp(const LookUpBatch& batch, Done done) override;
  bool asynchronous() const override { return parts_.front()->store->asynchronous(); }
  // Replicas: all the parts' slots; rows: every batch takes a slot of each part.
  int max_inflight_batches() const override;
  // The parts' caches together (their host tiers); nullopt where no part has one.
  std::optional<CacheStats> cache_stats() const override;

  // Every part's rows prepared (replicas), or each id's owner's (rows); WriteRows writes them
  // part by part. A part's failure is a lost device (GpuStore::WriteRows), which ends the server.
  absl::StatusOr<std::unique_ptr<PreparedRows>> PrepareRows(
      absl::Span<const int64_t> ids, DataType rows_type, absl::Span<const std::byte> rows) override;
  absl::Status WriteRows(PreparedRows& rows) override;
  absl::Status ReadRows(size_t offset, absl::Span<std::byte> out) const override;
  absl::StatusOr<std::unique_ptr<PreparedTable>> PrepareTable(const TableSource& source) override;
  absl::Status SwapTable(PreparedTable& table) override;

 private:
  struct Part {
    std::unique_ptr<EmbeddingStore> store;
    RowRange rows;                 // its rows, as this store's rows (its block of them, or all)
    std::atomic<int> inflight{0};  // batches given and not yet done (replicas)
  };
  struct ShardedBatch;

  MultiDeviceStore(TableInfo info, int64_t max_batch_ids, std::vector<std::unique_ptr<Part>> parts);

  void LookUpReplicated(const LookUpBatch& batch, Done done);
  void LookUpSharded(const LookUpBatch& batch, Done done);
  // After every part of `batch` has ended: its answer put together, and its caller's `done`.
  void Assemble(ShardedBatch& batch) const;

  const std::vector<std::unique_ptr<Part>> parts_;
  const RowRange::Blocks blocks_;  // rows: which part holds a row of this store
  std::atomic<uint32_t> next_{0};  // replicas: where the search for the least busy starts
  PartObserver observer_;
};

}  // namespace emb::service

#endif  // EMB_SERVICE_STORE_MULTI_DEVICE_STORE_H_
