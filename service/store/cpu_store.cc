#include "service/store/cpu_store.h"

#include <cstring>
#include <utility>
#include <vector>

#include "kernels/cpu_gather.h"
#include "service/common/status_macros.h"

namespace emb::service {

absl::StatusOr<std::unique_ptr<CpuStore>> CpuStore::Create(const TableSource& source,
                                                           const StoreOptions& options) {
  ASSIGN_OR_RETURN(std::unique_ptr<HugePageRows> rows, source.ReadAll());
  return std::unique_ptr<CpuStore>(
      new CpuStore(TableInfo::Of(source, "cpu"), std::move(rows), options));
}

std::unique_ptr<CpuStore> CpuStore::CreateOver(TableInfo info, std::unique_ptr<HugePageRows> rows,
                                               const StoreOptions& options) {
  info.device = "cpu";
  return std::unique_ptr<CpuStore>(new CpuStore(std::move(info), std::move(rows), options));
}

CpuStore::CpuStore(TableInfo info, std::unique_ptr<HugePageRows> rows, const StoreOptions& options)
    : EmbeddingStore(std::move(info), options.max_batch_ids),
      clock_(options.clock),
      data_(std::move(rows)) {}

void CpuStore::LookUp(const LookUpBatch& batch, Done done) {
  const TableInfo& table = info();
  const size_t row_bytes = static_cast<size_t>(table.dim) * ElementSize(batch.out_type);
  const size_t plain = batch.plain_ids();
  if (absl::Status s = CheckRowsOut(batch.answer_rows(), row_bytes, batch.outs, plain); !s.ok()) {
    done(s, StageTimes{});
    return;
  }
  // Each caller's rows are gathered, or its bags pooled, straight into its span.
  const absl::Time start = clock_->Now();
  size_t first = 0;  // the span's first answer row
  for (const AnswerSpan& out : batch.outs) {
    const size_t n = out.host.size() / row_bytes;
    if (first < plain) {
      kernels::CpuGather(data_->data(), table.dtype, table.dim, batch.ids.subspan(first, n),
                         batch.out_type, out.host.data());
    } else {
      const size_t bag = first - plain;  // the span's first bag
      kernels::Bags bags;
      bags.ids = batch.ids;
      bags.offsets = batch.bags.offsets.subspan(bag, n + 1);
      bags.weights = batch.bags.weights;
      if (!batch.bags.scales.empty()) {
        bags.scales = batch.bags.scales.subspan(bag, n);
      }
      kernels::CpuPooledGather(data_->data(), table.dtype, table.dim, bags, batch.out_type,
                               out.host.data());
    }
    first += n;
  }
  StageTimes times;
  times.gather = SecondsSince(clock_, start);
  done(absl::OkStatus(), times);
}

namespace {

// Distinct ids and their rows, in the table's type.
class HostPreparedRows final : public PreparedRows {
 public:
  HostPreparedRows(const CpuStore* maker, std::vector<int64_t> ids, std::vector<std::byte> rows)
      : PreparedRows(maker, static_cast<int64_t>(ids.size())),
        ids(std::move(ids)),
        rows(std::move(rows)) {}
  const std::vector<int64_t> ids;
  const std::vector<std::byte> rows;
};

}  // namespace

absl::StatusOr<std::unique_ptr<PreparedRows>> CpuStore::PrepareRows(
    absl::Span<const int64_t> ids, DataType rows_type, absl::Span<const std::byte> rows) {
  ASSIGN_OR_RETURN(const EncodedUpdate update, EncodedUpdate::Plan(info(), ids, rows_type, rows));
  std::vector<int64_t> kept_ids(update.count());
  std::vector<std::byte> converted(update.count() * RowBytes(info().dtype, info().dim));
  RETURN_IF_ERROR(update.Write(kept_ids.data(), converted.data()));
  return std::make_unique<HostPreparedRows>(this, std::move(kept_ids), std::move(converted));
}

absl::Status CpuStore::WriteRows(PreparedRows& prepared) {
  auto* rows = MadeBy<HostPreparedRows>(this, prepared);
  if (rows == nullptr) {
    return absl::InternalError("WriteRows: rows prepared by another store");
  }
  const size_t row = RowBytes(info().dtype, info().dim);
  for (size_t k = 0; k < rows->ids.size(); ++k) {
    std::memcpy(data_->mutable_data() + static_cast<size_t>(rows->ids[k]) * row,
                rows->rows.data() + k * row, row);
  }
  return absl::OkStatus();
}

absl::Status CpuStore::ReadRows(size_t offset, absl::Span<std::byte> out) const {
  RETURN_IF_ERROR(CheckReadRange(offset, out.size()));
  std::memcpy(out.data(), data_->data() + offset, out.size());
  return absl::OkStatus();
}

namespace {

using CpuPreparedTable = PreparedTableOf<std::unique_ptr<HugePageRows>>;

}  // namespace

absl::StatusOr<std::unique_ptr<PreparedTable>> CpuStore::PrepareTable(const TableSource& source) {
  RETURN_IF_ERROR(
      CheckSameShape(info(), source.rows(), source.dim(), source.dtype(), source.origin()));
  ASSIGN_OR_RETURN(std::unique_ptr<HugePageRows> rows, source.ReadAll());
  return std::make_unique<CpuPreparedTable>(this, std::move(rows));
}

absl::Status CpuStore::SwapTable(PreparedTable& table) {
  auto* prepared = MadeBy<CpuPreparedTable>(this, table);
  if (prepared == nullptr) {
    return absl::InternalError("SwapTable: a table prepared by another store");
  }
  std::swap(data_, prepared->rows);
  return absl::OkStatus();
}

}  // namespace emb::service
