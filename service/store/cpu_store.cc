#include "service/store/cpu_store.h"

#include <chrono>
#include <utility>

#include "kernels/cpu_gather.h"
#include "service/common/status_macros.h"

namespace emb::service {

absl::StatusOr<std::unique_ptr<CpuStore>> CpuStore::Create(const TableSource& source,
                                                           int64_t max_batch_ids) {
  ASSIGN_OR_RETURN(std::unique_ptr<HostRows> rows, source.ReadAll());
  return std::unique_ptr<CpuStore>(new CpuStore(source, std::move(rows), max_batch_ids));
}

CpuStore::CpuStore(const TableSource& source, std::unique_ptr<HostRows> rows, int64_t max_batch_ids)
    : name_(source.name()),
      rows_(source.rows()),
      dim_(source.dim()),
      dtype_(source.dtype()),
      max_batch_ids_(max_batch_ids),
      data_(std::move(rows)) {}

void CpuStore::LookUp(absl::Span<const int64_t> ids, DataType out_type, RowsOut outs, Done done) {
  const size_t row_bytes = static_cast<size_t>(dim_) * ElementSize(out_type);
  if (absl::Status s = CheckRowsOut(ids.size(), row_bytes, outs); !s.ok()) {
    done(s, StageTimes{});
    return;
  }
  // Each caller's rows are gathered straight into its span.
  const auto start = std::chrono::steady_clock::now();
  size_t first = 0;
  for (absl::Span<std::byte> out : outs) {
    const size_t n = out.size() / row_bytes;
    kernels::CpuGather(data_->data(), dtype_, dim_, ids.subspan(first, n), out_type, out.data());
    first += n;
  }
  StageTimes times;
  times.gather = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  done(absl::OkStatus(), times);
}

}  // namespace emb::service
