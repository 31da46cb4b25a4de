#include "service/store/gpu/gpu_store.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "kernels/cpu_gather.h"
#include "kernels/pooled_lookup.h"
#include "kernels/scatter_rows.h"
#include "service/common/log.h"
#include "service/common/status_macros.h"
#include "service/store/gpu/table_upload.h"

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

GpuStore::GpuStore(const TableSource& source, int device, const StoreOptions& options)
    : EmbeddingStore(TableInfo::Of(source, absl::StrCat("cuda:", device)), options.max_batch_ids),
      options_(options),
      check_(device, options.on_device_lost) {}

size_t GpuStore::BatchBufferBytes(const StoreOptions& options, int64_t dim) {
  return SlotDeviceBytes(options.max_batch_ids, dim, options.inflight_batches);
}

absl::StatusOr<std::unique_ptr<GpuStore>> GpuStore::Create(const TableSource& source, int device,
                                                           const StoreOptions& options) {
  auto store = std::unique_ptr<GpuStore>(new GpuStore(source, device, options));
  const CudaCheck& check = store->check_;
  RETURN_IF_ERROR(check(cudaSetDevice(device), "cudaSetDevice"));
  ASSIGN_OR_RETURN(store->tuning_, kernels::GetGatherTuning(device));
  size_t free_bytes = 0;
  size_t total_bytes = 0;
  RETURN_IF_ERROR(check(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo"));
  const size_t buffers = BatchBufferBytes(options, source.dim());
  const size_t need = source.bytes() + buffers;
  const size_t budget =
      options.gpu_budget_bytes > 0 ? std::min(options.gpu_budget_bytes, free_bytes) : free_bytes;
  if (need <= budget) {
    RETURN_IF_ERROR(store->Load(source));
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
  const size_t max_out_bytes =
      static_cast<size_t>(options.max_batch_ids) * source.dim() * sizeof(float);
  ASSIGN_OR_RETURN(store->slots_, SlotPool::Create(options.inflight_batches, options.max_batch_ids,
                                                   max_out_bytes, check));
  // Two completion threads per slot: a slot is free again once its rows are out, while the
  // thread that answered it may still be finishing a call, so that every slot's batch has a
  // thread to wait for it.
  store->completer_ = std::make_unique<BatchCompleter>(store->slots_.get(), check, options,
                                                       2 * options.inflight_batches);
  return store;
}

absl::Status GpuStore::Load(const TableSource& source) {
  const absl::Time start = options_.clock->Now();
  const LoadPlan plan = PlanLoad(source.bytes(), options_.load_readers, options_.load_chunk_bytes,
                                 std::thread::hardware_concurrency());
  ASSIGN_OR_RETURN(d_table_, kernels::DeviceBuffer<std::byte>::Allocate(source.bytes()));
  ASSIGN_OR_RETURN(load_stats_, UploadTable(source, plan, d_table_.data(), check_, options_.clock));
  load_stats_.seconds = SecondsSince(options_.clock, start);
  LogInfo(LoadSummary(info().name, load_stats_));
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
  ASSIGN_OR_RETURN(host_tier_, HostTier::Create(source, check_, tier, options_));
  load_stats_ = host_tier_->load_stats();
  set_placement(
      true, tier.cache_rows,
      buffers + HostTier::DeviceBytes(source.rows(), tier.cache_rows, source.row_bytes()));
  LogInfo(LoadSummary(info().name, load_stats_), " (into pinned host memory)");
  return absl::OkStatus();
}

bool GpuStore::WrittenDirectly(const AnswerSpan& out) const {
  return out.device != nullptr && !out.host.empty() &&
         out.host.size() >= options_.direct_answer_min_bytes;
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
  slot.zero_copy =
      batch.bags.count() == 0 && ids.size() * row_bytes <= options_.zero_copy_max_bytes;
  if (slot.zero_copy) {
    // One launch a run: the kernel reads the ids from mapped pinned memory and writes the rows
    // to the caller's pinned answer, or to h_out, so a small batch skips two copies and their
    // launch latency.
    RETURN_IF_ERROR(ForEachRun(slot, batch.outs, row_bytes, [&](const Run& run) {
      return GatherRows(slot.mapped_ids + run.first_id, static_cast<int64_t>(run.bytes / row_bytes),
                        run.span != nullptr ? run.span->device : slot.mapped_out + run.first_byte,
                        batch.out_type, stream);
    }));
    return check_(cudaEventRecord(slot.copied_out.get(), stream), "cudaEventRecord");
  }
  RETURN_IF_ERROR(
      check_(cudaMemcpyAsync(slot.d_ids.data(), slot.h_ids.data(), ids.size() * sizeof(int64_t),
                             cudaMemcpyHostToDevice, stream),
             "copy ids to the device"));
  kernels::DeviceBags bags;
  if (batch.bags.count() > 0) {
    RETURN_IF_ERROR(CopyBagsIn(slot, batch, &bags));
  }
  RETURN_IF_ERROR(check_(cudaEventRecord(slot.copied_in.get(), stream), "cudaEventRecord"));
  const size_t plain = batch.plain_ids();
  if (plain > 0) {
    RETURN_IF_ERROR(GatherRows(slot.d_ids.data(), static_cast<int64_t>(plain), slot.d_out.data(),
                               batch.out_type, stream));
  }
  if (batch.bags.count() > 0) {
    bags.out = slot.d_out.data() + plain * row_bytes;
    RETURN_IF_ERROR(kernels::LaunchBags(bags, stream));
  }
  RETURN_IF_ERROR(check_(cudaEventRecord(slot.gathered.get(), stream), "cudaEventRecord"));
  // One copy a run: into the caller's pinned answer, or into h_out.
  RETURN_IF_ERROR(ForEachRun(slot, batch.outs, row_bytes, [&](const Run& run) {
    return check_(
        cudaMemcpyAsync(
            run.span != nullptr ? run.span->host.data() : slot.h_out.data() + run.first_byte,
            slot.d_out.data() + run.first_byte, run.bytes, cudaMemcpyDeviceToHost, stream),
        "copy rows to the host");
  }));
  return check_(cudaEventRecord(slot.copied_out.get(), stream), "cudaEventRecord");
}

absl::Status GpuStore::CopyBagsIn(BatchSlot& slot, const LookUpBatch& batch,
                                  kernels::DeviceBags* bags) {
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
  *bags = TableBags();
  bags->ids = slot.d_ids.data();
  bags->offsets = reinterpret_cast<const int64_t*>(d);
  bags->num_bags = static_cast<int64_t>(b.count());
  bags->num_ids = b.offsets.empty() ? 0 : b.offsets.back() - b.offsets.front();
  bags->weights = b.weights.empty() ? nullptr : reinterpret_cast<const float*>(d + weights_at);
  bags->scales = b.scales.empty() ? nullptr : reinterpret_cast<const float*>(d + scales_at);
  bags->out_type = batch.out_type;
  return absl::OkStatus();
}

kernels::DeviceBags GpuStore::TableBags() const {
  const TableInfo& table = info();
  kernels::DeviceBags bags;
  bags.table = host_tier_ != nullptr ? host_tier_->rows() : d_table_.data();
  bags.table_type = table.dtype;
  bags.rows = table.rows;
  bags.dim = table.dim;
  if (host_tier_ != nullptr) {
    bags.cached = host_tier_->cached();
  }
  return bags;
}

absl::Status GpuStore::GatherRows(const int64_t* ids, int64_t n, void* out, DataType out_type,
                                  cudaStream_t stream) const {
  if (host_tier_ == nullptr) {
    const TableInfo& table = info();
    return kernels::LaunchGather(tuning_, d_table_.data(), table.dtype, table.rows, table.dim, ids,
                                 n, out, out_type, stream);
  }
  // Rows of a host tier: the bag kernel with bags of one id, each row read where it is.
  kernels::DeviceBags bags = TableBags();
  bags.ids = ids;
  bags.num_bags = n;
  bags.out = out;
  bags.out_type = out_type;
  return kernels::LaunchBags(bags, stream);
}

void GpuStore::LookUp(const LookUpBatch& batch, Done done) {
  const size_t row_bytes = static_cast<size_t>(info().dim) * ElementSize(batch.out_type);
  if (absl::Status s = CheckRowsOut(batch.answer_rows(), row_bytes, batch.outs, batch.plain_ids());
      !s.ok()) {
    done(s, StageTimes{});
    return;
  }
  BatchSlot* slot = slots_->Acquire();
  if (host_tier_ != nullptr) {
    // The batch may read the cache's slots until it is answered.
    const uint64_t ticket = host_tier_->BeginBatch(batch.ids);
    done = [tier = host_tier_.get(), ticket, ids = batch.ids.size(), done = std::move(done)](
               const absl::Status& s, const StageTimes& times) mutable {
      tier->EndBatch(ticket, ids);
      done(s, times);
    };
  }
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
  GpuPreparedRows(GpuStore* store, std::unique_ptr<GpuStore::StagingBlock> block, int64_t rows,
                  size_t rows_offset)
      : PreparedRows(store, rows),
        store(store),
        block(std::move(block)),
        rows_offset(rows_offset) {}
  ~GpuPreparedRows() override { store->ReleaseStaging(std::move(block)); }

  GpuStore* const store;
  std::unique_ptr<GpuStore::StagingBlock> block;
  const size_t rows_offset;
};

absl::StatusOr<std::unique_ptr<GpuStore::StagingBlock>> GpuStore::AcquireStaging(size_t bytes) {
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
  const TableInfo& table = info();
  const size_t in_row = RowBytes(rows_type, table.dim);
  const size_t out_row = RowBytes(table.dtype, table.dim);
  if (rows.size() != ids.size() * in_row) {
    return absl::InternalError(absl::StrCat("PrepareRows: ", rows.size(), " bytes of rows for ",
                                            ids.size(), " ids of dim ", table.dim));
  }
  const std::vector<size_t> keep = LastOccurrences(ids);
  const size_t n = keep.size();
  constexpr size_t kAlign = 256;
  const size_t ids_bytes = (n * sizeof(int64_t) + kAlign - 1) / kAlign * kAlign;
  const size_t need = ids_bytes + n * out_row;
  RETURN_IF_ERROR(check_(cudaSetDevice(check_.device()), "cudaSetDevice"));
  ASSIGN_OR_RETURN(std::unique_ptr<StagingBlock> block, AcquireStaging(need));
  auto prepared =
      std::make_unique<GpuPreparedRows>(this, std::move(block), static_cast<int64_t>(n), ids_bytes);
  StagingBlock& b = *prepared->block;
  auto* h_ids = reinterpret_cast<int64_t*>(b.host.data());
  std::byte* h_rows = b.host.data() + ids_bytes;
  for (size_t k = 0; k < n; ++k) {
    h_ids[k] = ids[keep[k]];
    RETURN_IF_ERROR(EncodeRowOfUpdate(rows.data() + keep[k] * in_row, rows_type, table,
                                      h_rows + k * out_row, keep[k]));
  }
  if (n > 0 && host_tier_ == nullptr) {  // a host tier writes from the pinned host copy
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
  if (host_tier_ != nullptr) {
    const StagingBlock& b = *rows->block;
    return host_tier_->Write(absl::MakeConstSpan(reinterpret_cast<const int64_t*>(b.host.data()),
                                                 static_cast<size_t>(rows->rows())),
                             b.host.data() + rows->rows_offset);
  }
  const size_t row = RowBytes(info().dtype, info().dim);
  absl::MutexLock lock(&write_mu_);
  RETURN_IF_ERROR(check_(cudaSetDevice(check_.device()), "cudaSetDevice"));
  if (write_stream_.get() == nullptr) {
    ASSIGN_OR_RETURN(write_stream_, kernels::CudaStream::Create());
  }
  const StagingBlock& b = *rows->block;
  RETURN_IF_ERROR(kernels::LaunchScatterRows(
      d_table_.data(), row, reinterpret_cast<const int64_t*>(b.device.data()),
      b.device.data() + rows->rows_offset, rows->rows(), write_stream_.get()));
  // Written before the first LookUp after this one is enqueued (the batcher starts none until
  // this returns), so every later gather reads the new rows.
  return check_(cudaStreamSynchronize(write_stream_.get()), "write updated rows");
}

absl::Status GpuStore::ReadRows(size_t offset, absl::Span<std::byte> out) const {
  RETURN_IF_ERROR(CheckReadRange(offset, out.size()));
  if (host_tier_ != nullptr) {
    host_tier_->Read(offset, out);
    return absl::OkStatus();
  }
  RETURN_IF_ERROR(check_(cudaSetDevice(check_.device()), "cudaSetDevice"));
  // A synchronous copy on the legacy stream, which the batches' non-blocking streams do not wait
  // for: lookups go on while a table is read back.
  return check_(
      cudaMemcpy(out.data(), d_table_.data() + offset, out.size(), cudaMemcpyDeviceToHost),
      "copy the table to the host");
}

namespace {

// The next version's rows: in device memory, or pinned host memory for a host tier.
using DevicePreparedTable = PreparedTableOf<kernels::DeviceBuffer<std::byte>>;
using TieredPreparedTable = PreparedTableOf<std::unique_ptr<PinnedHostRows>>;

}  // namespace

absl::StatusOr<std::unique_ptr<PreparedTable>> GpuStore::PrepareTable(const TableSource& source) {
  RETURN_IF_ERROR(
      CheckSameShape(info(), source.rows(), source.dim(), source.dtype(), source.origin()));
  if (host_tier_ != nullptr) {
    ASSIGN_OR_RETURN(std::unique_ptr<PinnedHostRows> rows, host_tier_->ReadVersion(source));
    return std::make_unique<TieredPreparedTable>(this, std::move(rows));
  }
  RETURN_IF_ERROR(check_(cudaSetDevice(check_.device()), "cudaSetDevice"));
  size_t free_bytes = 0;
  size_t total_bytes = 0;
  RETURN_IF_ERROR(check_(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo"));
  if (source.bytes() > free_bytes) {
    return absl::FailedPreconditionError(absl::StrCat(
        "loading ", source.origin(), " beside the served table needs ", source.bytes(),
        " bytes on ", check_.device_name(), " but ", free_bytes, " of ", total_bytes,
        " are free; the served version stays (a version that does not fit twice needs a "
        "restart, or a device with room for both)"));
  }
  ASSIGN_OR_RETURN(auto rows, kernels::DeviceBuffer<std::byte>::Allocate(source.bytes()));
  const LoadPlan plan = PlanLoad(source.bytes(), options_.load_readers, options_.load_chunk_bytes,
                                 std::thread::hardware_concurrency());
  ASSIGN_OR_RETURN(LoadStats stats, UploadTable(source, plan, rows.data(), check_, options_.clock));
  (void)stats;
  return std::make_unique<DevicePreparedTable>(this, std::move(rows));
}

absl::Status GpuStore::SwapTable(PreparedTable& table) {
  if (table.maker() != this) {
    return absl::InternalError("SwapTable: a table prepared by another store");
  }
  if (host_tier_ != nullptr) {
    // Fails only on a CUDA failure emptying the cache, which `check_` has reported (a lost
    // device).
    return host_tier_->Swap(MadeBy<TieredPreparedTable>(this, table)->rows);
  }
  std::swap(d_table_, MadeBy<DevicePreparedTable>(this, table)->rows);
  return absl::OkStatus();
}

std::optional<CacheStats> GpuStore::cache_stats() const {
  if (host_tier_ == nullptr) {
    return std::nullopt;
  }
  return host_tier_->stats();
}

}  // namespace emb::service
