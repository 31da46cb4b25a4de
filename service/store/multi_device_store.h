// MultiDeviceStore: one table over several devices (--device=cuda:0,cuda:1), behind the
// EmbeddingStore interface, so that the batcher and the service treat it as any other store.
// It holds one store a device (its parts), each made by the factory for its device:
//   replicas (Placement::kReplicated): every part holds the whole table. Each batch goes to the
//     part with the fewest batches in flight (ties in turn), so the devices share the load.
//     Updates and versions go to every part.
//   rows (Placement::kRowSharded): part k holds block k of the rows (ShardSpec's arithmetic: the
//     rows in blocks of ceil(rows / parts)), so a table larger than one device is served. A
//     batch's ids are split by owner and every part gathers its own ids at once into its stretch
//     of one block of a RowAssembly's staging rows; as the last part ends, the assembly's store
//     answers the caller's batch from that block (each id replaced by its row's place in it), so
//     the rows are put in order, converted and pooled as one device does (the answer is bit for
//     bit a single device's). On GPUs the staging rows are on the first one; with a CPU among the
//     devices, in host memory (store_factory's RowAssemblyOn).
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

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "service/store/embedding_store.h"
#include "service/tables/table_source.h"

namespace emb::service {

// Where a row split's answers are put together: a store (`store`) whose rows are `slots` blocks
// of `block_rows` staging rows (a batch's ids at most) of its table's type, block b's row r being
// the store's row b * block_rows + r. rows_at(b, r, n) is the span a part writes rows r .. r + n of
// block b through (store_factory's RowAssemblyOn).
struct RowAssembly {
  std::unique_ptr<EmbeddingStore> store;
  std::function<AnswerSpan(int block, int64_t row, int64_t rows)> rows_at;
  int slots = 0;
  int64_t block_rows = 0;
  size_t device_bytes = 0;  // GPU memory: the staging rows and the store's batch buffers
};

class MultiDeviceStore final : public EmbeddingStore {
 public:
  // Makes the part of `source` for device `part` (a store over `source` or a slice of it).
  using PartFactory =
      std::function<absl::StatusOr<std::unique_ptr<EmbeddingStore>>(const TableSource&, int part)>;
  // Called as each part ends its share of a batch: which part, its stage times, and how many ids
  // it gathered (per-device metrics).
  using PartObserver = std::function<void(int part, const StageTimes& times, size_t ids)>;
  // Makes the assembly of a row split of `table` (batches of up to `max_batch_ids` ids).
  using AssemblyFactory = std::function<absl::StatusOr<std::unique_ptr<RowAssembly>>(
      const TableInfo& table, int64_t max_batch_ids)>;

  // Makes `devices` parts of `source` with `make_part`, placed as `placement` (kReplicated or
  // kRowSharded). `devices` names each part's device for TableInfo. Errors: the parts' own, and
  // INVALID_ARGUMENT for fewer than two devices or a row split that leaves a device no rows.
  // A row split's answers are put together by `make_assembly`'s assembly (unused for replicas).
  static absl::StatusOr<std::unique_ptr<MultiDeviceStore>> Create(
      const TableSource& source, Placement placement, const std::vector<std::string>& devices,
      const PartFactory& make_part, const AssemblyFactory& make_assembly);

  // Set before the first LookUp.
  void set_part_observer(PartObserver observer) { observer_ = std::move(observer); }
  // The part that holds `id` (a row of this store, from 0) for rows; 0 for replicas.
  int OwnerOf(int64_t id) const;
  // GPU memory the row split's answers are put together in (in info().device_bytes, besides the
  // parts'); 0 for replicas and for staging rows in host memory.
  size_t assembly_bytes() const { return assembly_ != nullptr ? assembly_->device_bytes : 0; }

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

  MultiDeviceStore(TableInfo info, int64_t max_batch_ids, std::vector<std::unique_ptr<Part>> parts,
                   std::unique_ptr<RowAssembly> assembly);

  void LookUpReplicated(const LookUpBatch& batch, Done done);
  void LookUpSharded(const LookUpBatch& batch, Done done);
  // After every part of `batch` has ended: its answer put together by the assembly's store, and
  // its caller's `done`.
  void Assemble(const std::shared_ptr<ShardedBatch>& batch);
  // A free block of the assembly's staging rows, waiting for one while all are taken.
  int AcquireBlock();
  void ReleaseBlock(int block);

  const std::vector<std::unique_ptr<Part>> parts_;
  const RowRange::Blocks blocks_;                // rows: which part holds a row of this store
  const std::unique_ptr<RowAssembly> assembly_;  // rows; nullptr for replicas
  absl::Mutex blocks_mu_;
  std::vector<int> free_blocks_ ABSL_GUARDED_BY(blocks_mu_);
  std::atomic<uint32_t> next_{0};  // replicas: where the search for the least busy starts
  PartObserver observer_;
};

}  // namespace emb::service

#endif  // EMB_SERVICE_STORE_MULTI_DEVICE_STORE_H_
