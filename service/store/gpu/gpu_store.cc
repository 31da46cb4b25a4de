#include "service/store/gpu/gpu_store.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "kernels/lookup.h"
#include "service/common/log.h"
#include "service/common/status_macros.h"
#include "service/store/gpu/device_rows.h"
#include "service/store/gpu/host_tier.h"

namespace emb::service {
namespace {

// Bytes of GPU memory the batch buffers of `slots` slots take besides the table.
size_t SlotDeviceBytes(int64_t max_batch_ids, int64_t dim, int slots) {
  const size_t per_slot = static_cast<size_t>(max_batch_ids) *
                              (sizeof(int64_t) + static_cast<size_t>(dim) * sizeof(float)) +
                          SlotBagsBytes(max_batch_ids);
  return per_slot * static_cast<size_t>(slots);
}

}  // namespace

GpuStore::GpuStore(TableInfo info, int device, const StoreOptions& options)
    : EmbeddingStore(std::move(info), options.max_batch_ids),
      options_(options),
      check_(device, options.on_device_lost) {}

size_t GpuStore::BatchBufferBytes(const StoreOptions& options, int64_t dim) {
  return SlotDeviceBytes(options.max_batch_ids, dim, options.inflight_batches);
}

absl::StatusOr<std::unique_ptr<GpuStore>> GpuStore::Create(const TableSource& source, int device,
                                                           const StoreOptions& options) {
  auto store = std::unique_ptr<GpuStore>(
      new GpuStore(TableInfo::Of(source, absl::StrCat("cuda:", device)), device, options));
  const CudaCheck& check = store->check_;
  RETURN_IF_ERROR(check(cudaSetDevice(device), "cudaSetDevice"));
  size_t free_bytes = 0;
  size_t total_bytes = 0;
  RETURN_IF_ERROR(check(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo"));
  const size_t buffers = BatchBufferBytes(options, source.dim());
  const size_t need = source.bytes() + buffers;
  const size_t budget =
      options.gpu_budget_bytes > 0 ? std::min(options.gpu_budget_bytes, free_bytes) : free_bytes;
  if (need <= budget) {
    ASSIGN_OR_RETURN(store->rows_, DeviceRows::Create(source, check, options));
    store->set_placement(false, 0, need);
  } else {
    const std::string why = absl::StrCat(
        "it needs ", need, " bytes (", source.bytes(),
        " for the rows, the rest for batch buffers) but ",
        options.gpu_budget_bytes > 0
            ? absl::StrCat("its GPU budget is ", options.gpu_budget_bytes, " bytes and ")
            : "",
        free_bytes, " of ", total_bytes, " bytes are free");
    if (!options.host_tier) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "table '", source.name(), "' does not fit on ", check.device_name(), ": ", why));
    }
    RETURN_IF_ERROR(store->LoadHostTier(source, budget, buffers, why));
  }
  RETURN_IF_ERROR(store->MakeSlots());
  return store;
}

absl::StatusOr<std::unique_ptr<GpuStore>> GpuStore::CreateOver(TableInfo info,
                                                               std::unique_ptr<TableRows> rows,
                                                               int device,
                                                               const StoreOptions& options) {
  info.device = absl::StrCat("cuda:", device);
  auto store = std::unique_ptr<GpuStore>(new GpuStore(std::move(info), device, options));
  RETURN_IF_ERROR(store->check_(cudaSetDevice(device), "cudaSetDevice"));
  store->rows_ = std::move(rows);
  RETURN_IF_ERROR(store->MakeSlots());
  return store;
}

absl::Status GpuStore::MakeSlots() {
  ASSIGN_OR_RETURN(tuning_, kernels::GetGatherTuning(check_.device()));
  const size_t max_out_bytes =
      static_cast<size_t>(options_.max_batch_ids) * info().dim * sizeof(float);
  ASSIGN_OR_RETURN(slots_, SlotPool::Create(options_.inflight_batches, options_.max_batch_ids,
                                            max_out_bytes, check_));
  // Two completion threads per slot: a slot is free again once its rows are out, while the
  // thread that answered it may still be finishing a call, so that every slot's batch has a
  // thread to wait for it.
  completer_ = std::make_unique<BatchCompleter>(slots_.get(), check_, options_,
                                                2 * options_.inflight_batches);
  return absl::OkStatus();
}

absl::Status GpuStore::LoadHostTier(const TableSource& source, size_t budget, size_t buffers,
                                    absl::string_view why) {
  // Without a budget, a sixteenth of the free memory is left for what else the device runs.
  const size_t usable = options_.gpu_budget_bytes > 0 ? budget : budget - budget / 16;
  const size_t slot_map = HostTier::DeviceBytes(source.rows(), 0, source.row_bytes());
  if (usable < buffers + slot_map) {
    return absl::ResourceExhaustedError(
        absl::StrCat("table '", source.name(), "' does not fit on ", check_.device_name(), ": ",
                     why, "; in host memory it would still need ", buffers + slot_map,
                     " bytes of GPU memory (batch buffers and a slot per row)"));
  }
  HostTier::Options tier;
  tier.cache_rows = std::min<int64_t>(
      source.rows(), static_cast<int64_t>((usable - buffers - slot_map) / source.row_bytes()));
  tier.hot_ids = options_.hot_ids;
  tier.samples_per_batch = options_.cache_samples_per_batch;
  LogInfo("table '", source.name(), "' does not fit on ", check_.device_name(), " (", why,
          "): serving it from pinned host memory with a GPU cache of ", tier.cache_rows, " rows (",
          HostTier::DeviceBytes(source.rows(), tier.cache_rows, source.row_bytes()),
          " bytes with its slots)");
  ASSIGN_OR_RETURN(rows_, HostTier::Create(source, check_, tier, options_));
  set_placement(
      true, tier.cache_rows,
      buffers + HostTier::DeviceBytes(source.rows(), tier.cache_rows, source.row_bytes()));
  LogInfo(LoadSummary(info().name, rows_->load_stats()), " (into pinned host memory)");
  return absl::OkStatus();
}

bool GpuStore::WrittenDirectly(const AnswerSpan& out) const {
  return out.device_only() || (out.device != nullptr && !out.host.empty() &&
                               out.host.size() >= options_.direct_answer_min_bytes);
}

template <typename F>
absl::Status GpuStore::ForEachRun(BatchSlot& slot, RowsOut outs, size_t row_bytes, F&& f) const {
  Run run{0, 0, 0, nullptr};
  for (size_t i = 0; i < outs.size();) {
    run.bytes = 0;
    run.span = WrittenDirectly(outs[i]) ? &outs[i] : nullptr;
    do {
      if (run.span == nullptr) {
        slot.staged.push_back(BatchSlot::Staged{run.first_byte + run.bytes, outs[i].host.data(),
                                                outs[i].host.size()});
      }
      run.bytes += outs[i].host.size();
      ++i;
    } while (run.span == nullptr && i < outs.size() && !WrittenDirectly(outs[i]));
    RETURN_IF_ERROR(f(run));
    run.first_id += run.bytes / row_bytes;
    run.first_byte += run.bytes;
  }
  return absl::OkStatus();
}

absl::Status GpuStore::Enqueue(BatchSlot& slot, const LookUpBatch& batch) {
  const TableInfo& table = info();
  const absl::Span<const int64_t> ids = batch.ids;
  cudaStream_t stream = slot.stream.get();
  const size_t row_bytes = static_cast<size_t>(table.dim) * ElementSize(batch.out_type);
  std::memcpy(slot.h_ids.data(), ids.data(), ids.size() * sizeof(int64_t));
  RETURN_IF_ERROR(check_(cudaSetDevice(check_.device()), "cudaSetDevice"));
  slot.staged.clear();
  RETURN_IF_ERROR(check_(cudaEventRecord(slot.start.get(), stream), "cudaEventRecord"));
  // Not into device memory only: it may be another device's, which the kernel cannot write.
  const bool to_device = std::any_of(batch.outs.begin(), batch.outs.end(),
                                     [](const AnswerSpan& out) { return out.device_only(); });
  slot.zero_copy = !to_device && batch.bags.count() == 0 &&
                   ids.size() * row_bytes <= options_.zero_copy_max_bytes;
  if (slot.zero_copy) {
    // One launch a run: the kernel reads the ids from mapped pinned memory and writes the rows
    // to the caller's pinned answer, or to h_out, so a small batch skips two copies and their
    // launch latency.
    RETURN_IF_ERROR(ForEachRun(slot, batch.outs, row_bytes, [&](const Run& run) {
      return LaunchRows(slot.mapped_ids + run.first_id, static_cast<int64_t>(run.bytes / row_bytes),
                        run.span != nullptr ? run.span->device : slot.mapped_out + run.first_byte,
                        batch.out_type, stream);
    }));
    return check_(cudaEventRecord(slot.copied_out.get(), stream), "cudaEventRecord");
  }
  RETURN_IF_ERROR(
      check_(cudaMemcpyAsync(slot.d_ids.data(), slot.h_ids.data(), ids.size() * sizeof(int64_t),
                             cudaMemcpyHostToDevice, stream),
             "copy ids to the device"));
  kernels::LookupProblem bags;
  if (batch.bags.count() > 0) {
    RETURN_IF_ERROR(CopyBagsIn(slot, batch, &bags));
  }
  RETURN_IF_ERROR(check_(cudaEventRecord(slot.copied_in.get(), stream), "cudaEventRecord"));
  const size_t plain = batch.plain_ids();
  if (plain > 0) {
    RETURN_IF_ERROR(LaunchRows(slot.d_ids.data(), static_cast<int64_t>(plain), slot.d_out.data(),
                               batch.out_type, stream));
  }
  if (batch.bags.count() > 0) {
    bags.out = slot.d_out.data() + plain * row_bytes;
    RETURN_IF_ERROR(kernels::LaunchLookup(tuning_, bags, stream));
  }
  RETURN_IF_ERROR(check_(cudaEventRecord(slot.gathered.get(), stream), "cudaEventRecord"));
  // One copy a run: into the caller's pinned answer or device memory, or into h_out.
  RETURN_IF_ERROR(ForEachRun(slot, batch.outs, row_bytes, [&](const Run& run) {
    std::byte* to = slot.h_out.data() + run.first_byte;
    if (run.span != nullptr) {
      to = run.span->device_only() ? run.span->device : run.span->host.data();
    }
    return check_(cudaMemcpyAsync(to, slot.d_out.data() + run.first_byte, run.bytes,
                                  cudaMemcpyDefault, stream),
                  "copy rows out");
  }));
  return check_(cudaEventRecord(slot.copied_out.get(), stream), "cudaEventRecord");
}

absl::Status GpuStore::LaunchRows(const int64_t* ids, int64_t n, void* out, DataType out_type,
                                  cudaStream_t stream) const {
  kernels::LookupProblem rows = rows_->Table();
  rows.ids = ids;
  rows.num_bags = n;
  rows.out = out;
  rows.out_type = out_type;
  return kernels::LaunchLookup(tuning_, rows, stream);
}

absl::Status GpuStore::CopyBagsIn(BatchSlot& slot, const LookUpBatch& batch,
                                  kernels::LookupProblem* bags) {
  // offsets | weights | scales, each 256-byte aligned, in one copy.
  constexpr size_t kAlign = 256;
  auto aligned = [](size_t n) { return (n + kAlign - 1) / kAlign * kAlign; };
  const BatchBags& b = batch.bags;
  const size_t offsets_bytes = b.offsets.size() * sizeof(int64_t);
  const size_t weights_at = aligned(offsets_bytes);
  const size_t scales_at = aligned(weights_at + b.weights.size() * sizeof(float));
  const size_t bytes = scales_at + b.scales.size() * sizeof(float);
  if (bytes > slot.h_bags.size()) {
    return absl::InternalError(absl::StrCat("a batch's bags take ", bytes, " bytes, over the ",
                                            slot.h_bags.size(), " of a slot"));
  }
  std::byte* h = slot.h_bags.data();
  std::memcpy(h, b.offsets.data(), offsets_bytes);
  std::memcpy(h + weights_at, b.weights.data(), b.weights.size() * sizeof(float));
  std::memcpy(h + scales_at, b.scales.data(), b.scales.size() * sizeof(float));
  RETURN_IF_ERROR(check_(
      cudaMemcpyAsync(slot.d_bags.data(), h, bytes, cudaMemcpyHostToDevice, slot.stream.get()),
      "copy bags to the device"));
  std::byte* d = slot.d_bags.data();
  *bags = rows_->Table();
  bags->ids = slot.d_ids.data();
  bags->offsets = reinterpret_cast<const int64_t*>(d);
  bags->num_bags = static_cast<int64_t>(b.count());
  bags->num_ids = b.offsets.empty() ? 0 : b.offsets.back() - b.offsets.front();
  bags->weights = b.weights.empty() ? nullptr : reinterpret_cast<const float*>(d + weights_at);
  bags->scales = b.scales.empty() ? nullptr : reinterpret_cast<const float*>(d + scales_at);
  bags->out_type = batch.out_type;
  return absl::OkStatus();
}

void GpuStore::LookUp(const LookUpBatch& batch, Done done) {
  const size_t row_bytes = static_cast<size_t>(info().dim) * ElementSize(batch.out_type);
  if (absl::Status s = CheckRowsOut(batch.answer_rows(), row_bytes, batch.outs, batch.plain_ids());
      !s.ok()) {
    done(s, StageTimes{});
    return;
  }
  BatchSlot* slot = slots_->Acquire();
  done = rows_->Track(batch.ids, std::move(done));
  if (absl::Status s = Enqueue(*slot, batch); !s.ok()) {
    // Wait out whatever did get enqueued before handing the slot back.
    (void)cudaStreamSynchronize(slot->stream.get());
    slots_->Release(slot);
    done(s, StageTimes{});
    return;
  }
  slot->done = std::move(done);
  completer_->Push(slot);
}

// Rows prepared in a staging block's device memory: the ids at offset 0, the rows (in the
// table's type) at rows_offset. Gives the block back to its store when destroyed.
class GpuPreparedRows final : public PreparedRows {
 public:
  GpuPreparedRows(GpuStore* store, std::unique_ptr<StagingBlock> block, int64_t rows,
                  size_t rows_offset)
      : PreparedRows(store, rows),
        store(store),
        block(std::move(block)),
        rows_offset(rows_offset) {}
  ~GpuPreparedRows() override { store->ReleaseStaging(std::move(block)); }

  GpuStore* const store;
  std::unique_ptr<StagingBlock> block;
  const size_t rows_offset;
};

absl::StatusOr<std::unique_ptr<StagingBlock>> GpuStore::AcquireStaging(size_t bytes) {
  {
    absl::MutexLock lock(&staging_mu_);
    for (auto it = free_staging_.begin(); it != free_staging_.end(); ++it) {
      if ((*it)->host.size() >= bytes) {
        std::unique_ptr<StagingBlock> block = std::move(*it);
        free_staging_.erase(it);
        return block;
      }
    }
  }
  // At least 4 MiB, so that messages of a few thousand rows share blocks.
  const size_t size = std::max(bytes, size_t{4} << 20);
  auto block = std::make_unique<StagingBlock>();
  ASSIGN_OR_RETURN(block->host, kernels::PinnedBuffer<std::byte>::Allocate(size));
  ASSIGN_OR_RETURN(block->device, kernels::DeviceBuffer<std::byte>::Allocate(size));
  ASSIGN_OR_RETURN(block->stream, kernels::CudaStream::Create());
  return block;
}

void GpuStore::ReleaseStaging(std::unique_ptr<StagingBlock> block) {
  constexpr size_t kKeep = 4;  // blocks kept for reuse; more are freed
  absl::MutexLock lock(&staging_mu_);
  if (free_staging_.size() < kKeep) {
    free_staging_.push_back(std::move(block));
  }
}

absl::StatusOr<std::unique_ptr<PreparedRows>> GpuStore::PrepareRows(
    absl::Span<const int64_t> ids, DataType rows_type, absl::Span<const std::byte> rows) {
  ASSIGN_OR_RETURN(const EncodedUpdate update, EncodedUpdate::Plan(info(), ids, rows_type, rows));
  const size_t n = update.count();
  constexpr size_t kAlign = 256;
  const size_t ids_bytes = (n * sizeof(int64_t) + kAlign - 1) / kAlign * kAlign;
  const size_t need = ids_bytes + n * RowBytes(info().dtype, info().dim);
  RETURN_IF_ERROR(check_(cudaSetDevice(check_.device()), "cudaSetDevice"));
  ASSIGN_OR_RETURN(std::unique_ptr<StagingBlock> block, AcquireStaging(need));
  auto prepared =
      std::make_unique<GpuPreparedRows>(this, std::move(block), static_cast<int64_t>(n), ids_bytes);
  StagingBlock& b = *prepared->block;
  RETURN_IF_ERROR(
      update.Write(reinterpret_cast<int64_t*>(b.host.data()), b.host.data() + ids_bytes));
  if (n > 0 && rows_->writes_from_device()) {
    RETURN_IF_ERROR(check_(cudaMemcpyAsync(b.device.data(), b.host.data(), need,
                                           cudaMemcpyHostToDevice, b.stream.get()),
                           "copy updated rows to the device"));
    RETURN_IF_ERROR(check_(cudaStreamSynchronize(b.stream.get()), "copy updated rows"));
  }
  return prepared;
}

absl::Status GpuStore::WriteRows(PreparedRows& prepared) {
  auto* rows = MadeBy<GpuPreparedRows>(this, prepared);
  if (rows == nullptr) {
    return absl::InternalError("WriteRows: rows prepared by another store");
  }
  if (rows->rows() == 0) {
    return absl::OkStatus();
  }
  return rows_->Write(*rows->block, rows->rows(), rows->rows_offset);
}

absl::Status GpuStore::ReadRows(size_t offset, absl::Span<std::byte> out) const {
  RETURN_IF_ERROR(CheckReadRange(offset, out.size()));
  return rows_->Read(offset, out);
}

absl::StatusOr<std::unique_ptr<PreparedTable>> GpuStore::PrepareTable(const TableSource& source) {
  RETURN_IF_ERROR(
      CheckSameShape(info(), source.rows(), source.dim(), source.dtype(), source.origin()));
  return rows_->Prepare(source, this);
}

absl::Status GpuStore::SwapTable(PreparedTable& table) {
  if (table.maker() != this) {
    return absl::InternalError("SwapTable: a table prepared by another store");
  }
  return rows_->Swap(table, this);
}

}  // namespace emb::service
