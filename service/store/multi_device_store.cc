#include "service/store/multi_device_store.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "service/common/status_macros.h"

namespace emb::service {
namespace {

// Rows of an update prepared by each part (null where a part has none of its ids).
class MultiPreparedRows final : public PreparedRows {
 public:
  MultiPreparedRows(const MultiDeviceStore* maker, int64_t rows,
                    std::vector<std::unique_ptr<PreparedRows>> parts)
      : PreparedRows(maker, rows), parts(std::move(parts)) {}
  std::vector<std::unique_ptr<PreparedRows>> parts;
};

// Each part's prepared version.
using MultiPreparedTable = PreparedTableOf<std::vector<std::unique_ptr<PreparedTable>>>;

// The later of each stage of two parts that ran side by side; the host's copies add up.
void Merge(const StageTimes& part, StageTimes& all) {
  all.copy_in = std::max(all.copy_in, part.copy_in);
  all.gather = std::max(all.gather, part.gather);
  all.copy_out = std::max(all.copy_out, part.copy_out);
  all.host_copy += part.host_copy;
}

}  // namespace

// One batch split over the parts: what each part gathers, and where its rows go.
struct MultiDeviceStore::ShardedBatch {
  LookUpBatch batch;  // the caller's (its spans live until `done`)
  Done done;
  // Per part: its ids (its own, from 0), and its span of the block's staging rows.
  std::vector<std::vector<int64_t>> ids;
  std::vector<AnswerSpan> spans;
  // The block of the assembly's staging rows the parts write, and for each id of the batch the
  // row of the assembly's store that holds its row.
  int block = -1;
  std::vector<int64_t> staged_ids;
  std::atomic<int> remaining{0};  // parts not yet ended, plus one while they are being started
  absl::Mutex mu;
  absl::Status status ABSL_GUARDED_BY(mu);
  StageTimes times ABSL_GUARDED_BY(mu);
};

absl::StatusOr<std::unique_ptr<MultiDeviceStore>> MultiDeviceStore::Create(
    const TableSource& source, Placement placement, const std::vector<std::string>& devices,
    const PartFactory& make_part, const AssemblyFactory& make_assembly) {
  const int n = static_cast<int>(devices.size());
  if (n < 2 || placement == Placement::kOneDevice) {
    return absl::InvalidArgumentError(
        absl::StrCat("table '", source.name(),
                     "': a table on several devices needs two or more devices and "
                     "a placement of replicas or rows"));
  }
  TableInfo info = TableInfo::Of(source, absl::StrJoin(devices, ","));
  info.placement = placement;
  std::vector<std::unique_ptr<Part>> parts;
  int64_t max_batch_ids = 0;
  for (int k = 0; k < n; ++k) {
    std::unique_ptr<EmbeddingStore> store;
    if (placement == Placement::kReplicated) {
      ASSIGN_OR_RETURN(store, make_part(source, k));
    } else {
      ASSIGN_OR_RETURN(std::unique_ptr<TableSource> slice, source.Slice(k, n));
      ASSIGN_OR_RETURN(store, make_part(*slice, k));
    }
    const TableInfo& p = store->info();
    info.parts.push_back(DevicePart{devices[k], p.ids, p.device_bytes, p.host_tier});
    info.device_bytes += p.device_bytes;
    info.host_tier = info.host_tier || p.host_tier;
    info.cache_rows += p.cache_rows;
    max_batch_ids =
        k == 0 ? store->max_batch_ids() : std::min(max_batch_ids, store->max_batch_ids());
    auto part = std::make_unique<Part>();
    part->store = std::move(store);
    const RowRange all = RowRange::Whole(source.rows());
    part->rows = placement == Placement::kRowSharded ? all.Block(k, n) : all;
    parts.push_back(std::move(part));
  }
  std::unique_ptr<RowAssembly> assembly;
  if (placement == Placement::kRowSharded) {
    ASSIGN_OR_RETURN(assembly, make_assembly(info, max_batch_ids));
    info.device_bytes += assembly->device_bytes;
  }
  return std::unique_ptr<MultiDeviceStore>(
      new MultiDeviceStore(std::move(info), max_batch_ids, std::move(parts), std::move(assembly)));
}

MultiDeviceStore::MultiDeviceStore(TableInfo info, int64_t max_batch_ids,
                                   std::vector<std::unique_ptr<Part>> parts,
                                   std::unique_ptr<RowAssembly> assembly)
    : EmbeddingStore(std::move(info), max_batch_ids),
      parts_(std::move(parts)),
      blocks_(RowRange::Whole(this->info().rows).SplitInto(static_cast<int>(parts_.size()))),
      assembly_(std::move(assembly)) {
  for (int b = 0; assembly_ != nullptr && b < assembly_->slots; ++b) {
    free_blocks_.push_back(b);
  }
}

int MultiDeviceStore::AcquireBlock() {
  absl::MutexLock lock(&blocks_mu_);
  blocks_mu_.Await(absl::Condition(
      +[](std::vector<int>* free) { return !free->empty(); }, &free_blocks_));
  const int block = free_blocks_.back();
  free_blocks_.pop_back();
  return block;
}

void MultiDeviceStore::ReleaseBlock(int block) {
  absl::MutexLock lock(&blocks_mu_);
  free_blocks_.push_back(block);
}

int MultiDeviceStore::OwnerOf(int64_t id) const {
  return info().placement == Placement::kRowSharded ? blocks_.Of(id) : 0;
}

int MultiDeviceStore::max_inflight_batches() const {
  int sum = 0;
  int least = parts_.front()->store->max_inflight_batches();
  for (const auto& part : parts_) {
    sum += part->store->max_inflight_batches();
    least = std::min(least, part->store->max_inflight_batches());
  }
  if (info().placement == Placement::kReplicated) {
    return sum;
  }
  return std::min(least, assembly_->slots);
}

std::optional<CacheStats> MultiDeviceStore::cache_stats() const {
  std::optional<CacheStats> all;
  for (const auto& part : parts_) {
    const std::optional<CacheStats> s = part->store->cache_stats();
    if (!s.has_value()) {
      continue;
    }
    if (!all.has_value()) {
      all = CacheStats{};
      all->row_bytes = s->row_bytes;
    }
    all->capacity_rows += s->capacity_rows;
    all->cached_rows += s->cached_rows;
    all->lookups += s->lookups;
    all->misses += s->misses;
  }
  return all;
}

void MultiDeviceStore::LookUp(const LookUpBatch& batch, Done done) {
  if (info().placement == Placement::kReplicated) {
    LookUpReplicated(batch, std::move(done));
  } else {
    LookUpSharded(batch, std::move(done));
  }
}

void MultiDeviceStore::LookUpReplicated(const LookUpBatch& batch, Done done) {
  // The part with the fewest batches in flight, searched from a turning start so that idle
  // parts take batches in turn.
  const int n = static_cast<int>(parts_.size());
  const int start = static_cast<int>(next_.fetch_add(1, std::memory_order_relaxed) % n);
  int best = start;
  for (int i = 1; i < n; ++i) {
    const int k = (start + i) % n;
    if (parts_[k]->inflight.load(std::memory_order_relaxed) <
        parts_[best]->inflight.load(std::memory_order_relaxed)) {
      best = k;
    }
  }
  Part& part = *parts_[best];
  part.inflight.fetch_add(1, std::memory_order_relaxed);
  const size_t ids = batch.ids.size();
  part.store->LookUp(batch, [this, best, ids, done = std::move(done)](
                                const absl::Status& status, const StageTimes& times) mutable {
    parts_[best]->inflight.fetch_sub(1, std::memory_order_relaxed);
    if (status.ok() && observer_) {
      observer_(best, times, ids);
    }
    done(status, times);
  });
}

void MultiDeviceStore::LookUpSharded(const LookUpBatch& batch, Done done) {
  const size_t n = parts_.size();
  auto sharded = std::make_shared<ShardedBatch>();
  ShardedBatch& s = *sharded;
  s.batch = batch;
  s.done = std::move(done);
  s.ids.resize(n);
  s.spans.resize(n);
  // Each id's owner and place among its owner's ids, then among the block's rows: part k's rows
  // follow the earlier parts' (first[k]).
  std::vector<int> owner(batch.ids.size());
  std::vector<uint32_t> place(batch.ids.size());
  for (size_t i = 0; i < batch.ids.size(); ++i) {
    const int64_t id = batch.ids[i];
    const int k = OwnerOf(id);
    owner[i] = k;
    place[i] = static_cast<uint32_t>(s.ids[k].size());
    s.ids[k].push_back(parts_[k]->rows.ToLocal(id));
  }
  std::vector<int64_t> first(n, 0);
  int started = 0;
  for (size_t k = 0; k < n; ++k) {
    started += s.ids[k].empty() ? 0 : 1;
    if (k > 0) {
      first[k] = first[k - 1] + static_cast<int64_t>(s.ids[k - 1].size());
    }
  }
  s.block = AcquireBlock();
  const int64_t block_start = s.block * assembly_->block_rows;
  s.staged_ids.resize(batch.ids.size());
  for (size_t i = 0; i < batch.ids.size(); ++i) {
    s.staged_ids[i] = block_start + first[owner[i]] + place[i];
  }
  s.remaining.store(started + 1, std::memory_order_relaxed);
  auto part_done = [this, sharded](int k) {
    return [this, sharded, k](const absl::Status& status, const StageTimes& times) {
      ShardedBatch& s = *sharded;
      {
        absl::MutexLock lock(&s.mu);
        if (!status.ok() && s.status.ok()) {
          s.status = status;
        }
        Merge(times, s.times);
      }
      if (status.ok() && observer_) {
        observer_(k, times, s.ids[k].size());
      }
      if (s.remaining.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        Assemble(sharded);
      }
    };
  };
  for (size_t k = 0; k < n; ++k) {
    if (s.ids[k].empty()) {
      continue;
    }
    s.spans[k] = assembly_->rows_at(s.block, first[k], static_cast<int64_t>(s.ids[k].size()));
    LookUpBatch part_batch;
    part_batch.ids = s.ids[k];
    part_batch.out_type = assembly_->store->info().dtype;
    part_batch.outs = absl::MakeConstSpan(&s.spans[k], 1);
    parts_[k]->store->LookUp(part_batch, part_done(static_cast<int>(k)));
  }
  if (s.remaining.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    Assemble(sharded);
  }
}

void MultiDeviceStore::Assemble(const std::shared_ptr<ShardedBatch>& sharded) {
  ShardedBatch& s = *sharded;
  absl::Status status;
  StageTimes times;
  {
    absl::MutexLock lock(&s.mu);
    status = s.status;
    times = s.times;
  }
  if (!status.ok()) {
    ReleaseBlock(s.block);
    s.done(status, times);
    return;
  }
  // The caller's batch over the block's rows: the assembly's store gathers and pools them into
  // the callers' answers as one device would from the table.
  LookUpBatch batch = s.batch;
  batch.ids = s.staged_ids;
  assembly_->store->LookUp(
      batch, [this, sharded, times](const absl::Status& status, const StageTimes& last) mutable {
        ReleaseBlock(sharded->block);
        times.copy_in += last.copy_in;
        times.gather += last.gather;
        times.copy_out += last.copy_out;
        times.host_copy += last.host_copy;
        sharded->done(status, times);
      });
}

absl::StatusOr<std::unique_ptr<PreparedRows>> MultiDeviceStore::PrepareRows(
    absl::Span<const int64_t> ids, DataType rows_type, absl::Span<const std::byte> rows) {
  const size_t n = parts_.size();
  std::vector<std::unique_ptr<PreparedRows>> prepared(n);
  int64_t written = 0;
  if (info().placement == Placement::kReplicated) {
    for (size_t k = 0; k < n; ++k) {
      ASSIGN_OR_RETURN(prepared[k], parts_[k]->store->PrepareRows(ids, rows_type, rows));
    }
    written = prepared.front()->rows();
  } else {
    const size_t row_bytes = ids.empty() ? 0 : rows.size() / ids.size();
    std::vector<std::vector<int64_t>> part_ids(n);
    std::vector<std::vector<std::byte>> part_rows(n);
    for (size_t i = 0; i < ids.size(); ++i) {
      const int k = OwnerOf(ids[i]);
      part_ids[k].push_back(parts_[k]->rows.ToLocal(ids[i]));
      part_rows[k].insert(part_rows[k].end(), rows.begin() + i * row_bytes,
                          rows.begin() + (i + 1) * row_bytes);
    }
    for (size_t k = 0; k < n; ++k) {
      if (!part_ids[k].empty()) {
        ASSIGN_OR_RETURN(prepared[k],
                         parts_[k]->store->PrepareRows(part_ids[k], rows_type, part_rows[k]));
        written += prepared[k]->rows();
      }
    }
  }
  return std::make_unique<MultiPreparedRows>(this, written, std::move(prepared));
}

absl::Status MultiDeviceStore::WriteRows(PreparedRows& rows) {
  auto* prepared = MadeBy<MultiPreparedRows>(this, rows);
  if (prepared == nullptr) {
    return absl::InternalError("WriteRows: rows prepared by another store");
  }
  for (size_t k = 0; k < parts_.size(); ++k) {
    if (prepared->parts[k] != nullptr) {
      RETURN_IF_ERROR(parts_[k]->store->WriteRows(*prepared->parts[k]));
    }
  }
  return absl::OkStatus();
}

absl::Status MultiDeviceStore::ReadRows(size_t offset, absl::Span<std::byte> out) const {
  RETURN_IF_ERROR(CheckReadRange(offset, out.size()));
  if (info().placement == Placement::kReplicated) {
    return parts_.front()->store->ReadRows(offset, out);
  }
  // Each part's share of the range, from its own rows.
  const size_t row_bytes = RowBytes(info().dtype, info().dim);
  size_t done = 0;
  for (const auto& part : parts_) {
    const size_t begin = static_cast<size_t>(part->rows.first()) * row_bytes;
    const size_t end = begin + part->store->info().bytes();
    const size_t from = std::max(begin, offset + done);
    const size_t to = std::min(end, offset + out.size());
    if (from >= to) {
      continue;
    }
    RETURN_IF_ERROR(part->store->ReadRows(from - begin, out.subspan(from - offset, to - from)));
    done = to - offset;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<PreparedTable>> MultiDeviceStore::PrepareTable(
    const TableSource& source) {
  RETURN_IF_ERROR(
      CheckSameShape(info(), source.rows(), source.dim(), source.dtype(), source.origin()));
  const int n = static_cast<int>(parts_.size());
  std::vector<std::unique_ptr<PreparedTable>> prepared;
  for (int k = 0; k < n; ++k) {
    std::unique_ptr<PreparedTable> part;
    if (info().placement == Placement::kReplicated) {
      ASSIGN_OR_RETURN(part, parts_[k]->store->PrepareTable(source));
    } else {
      ASSIGN_OR_RETURN(std::unique_ptr<TableSource> slice, source.Slice(k, n));
      ASSIGN_OR_RETURN(part, parts_[k]->store->PrepareTable(*slice));
    }
    prepared.push_back(std::move(part));
  }
  return std::make_unique<MultiPreparedTable>(this, std::move(prepared));
}

absl::Status MultiDeviceStore::SwapTable(PreparedTable& table) {
  auto* prepared = MadeBy<MultiPreparedTable>(this, table);
  if (prepared == nullptr) {
    return absl::InternalError("SwapTable: a table prepared by another store");
  }
  // Each part's swap fails only on a lost device (which ends the server): the first such error.
  absl::Status status;
  for (size_t k = 0; k < parts_.size(); ++k) {
    status.Update(parts_[k]->store->SwapTable(*prepared->rows[k]));
  }
  return status;
}

}  // namespace emb::service
