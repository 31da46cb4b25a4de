#include "service/store/cpu_store.h"

#include <utility>

#include "absl/container/flat_hash_set.h"
#include "kernels/cpu_gather.h"
#include "service/common/status_macros.h"

namespace emb::service {

absl::StatusOr<std::unique_ptr<CpuStore>> CpuStore::Create(const TableSource& source,
                                                           const StoreOptions& options) {
  ASSIGN_OR_RETURN(std::unique_ptr<HugePageRows> rows, source.ReadAll());
  return std::unique_ptr<CpuStore>(new CpuStore(source, std::move(rows), options));
}

CpuStore::CpuStore(const TableSource& source, std::unique_ptr<HugePageRows> rows,
                   const StoreOptions& options)
    : EmbeddingStore(TableInfo{source.name(), source.rows(), source.dim(), source.dtype(), "cpu"},
                     options.max_batch_ids),
      clock_(options.clock),
      data_(std::move(rows)) {}

void CpuStore::LookUp(absl::Span<const int64_t> ids, DataType out_type, RowsOut outs, Done done) {
  const TableInfo& table = info();
  const size_t row_bytes = static_cast<size_t>(table.dim) * ElementSize(out_type);
  if (absl::Status s = CheckRowsOut(ids.size(), row_bytes, outs); !s.ok()) {
    done(s, StageTimes{});
    return;
  }
  // Each caller's rows are gathered straight into its span.
  const absl::Time start = clock_->Now();
  size_t first = 0;
  for (const AnswerSpan& out : outs) {
    const size_t n = out.host.size() / row_bytes;
    kernels::CpuGather(data_->data(), table.dtype, table.dim, ids.subspan(first, n), out_type,
                       out.host.data());
    first += n;
  }
  StageTimes times;
  times.gather = SecondsSince(clock_, start);
  done(absl::OkStatus(), times);
}

absl::StatusOr<int64_t> CpuStore::UpdateRows(absl::Span<const int64_t> ids, DataType rows_type,
                                             absl::Span<const std::byte> rows) {
  const TableInfo& table = info();
  if (rows.size() != ids.size() * static_cast<size_t>(table.dim) * ElementSize(rows_type)) {
    return absl::InternalError(absl::StrCat("UpdateRows: ", rows.size(), " bytes of rows for ",
                                            ids.size(), " ids of dim ", table.dim));
  }
  // In order, so that an id given twice keeps its last row.
  kernels::CpuScatter(rows.data(), rows_type, table.dim, ids, data_->mutable_data(), table.dtype);
  return static_cast<int64_t>(absl::flat_hash_set<int64_t>(ids.begin(), ids.end()).size());
}

}  // namespace emb::service
