#include "service/store/cpu_store.h"

#include <utility>

#include "kernels/cpu_gather.h"
#include "service/common/status_macros.h"

namespace emb::service {

absl::StatusOr<std::unique_ptr<CpuStore>> CpuStore::Create(const TableSource& source,
                                                           const StoreOptions& options) {
  ASSIGN_OR_RETURN(std::unique_ptr<HostRows> rows, source.ReadAll());
  return std::unique_ptr<CpuStore>(new CpuStore(source, std::move(rows), options));
}

CpuStore::CpuStore(const TableSource& source, std::unique_ptr<HostRows> rows,
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

}  // namespace emb::service
