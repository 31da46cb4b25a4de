// CpuStore: a table in host memory (read once from its file into huge pages), gathered on the
// calling thread. Thread-safe: LookUp only reads the table and writes its callers' spans.
#ifndef EMB_SERVICE_STORE_CPU_STORE_H_
#define EMB_SERVICE_STORE_CPU_STORE_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "service/store/embedding_store.h"
#include "service/tables/table_source.h"

namespace emb::service {

class CpuStore final : public EmbeddingStore {
 public:
  // Reads (or, for a demo table, generates) the rows into host memory. Errors from
  // TableSource::ReadAll().
  static absl::StatusOr<std::unique_ptr<CpuStore>> Create(const TableSource& source,
                                                          int64_t max_batch_ids);

  const std::string& name() const override { return name_; }
  int64_t rows() const override { return rows_; }
  int64_t dim() const override { return dim_; }
  DataType dtype() const override { return dtype_; }
  const std::string& device() const override { return device_; }
  int64_t max_batch_ids() const override { return max_batch_ids_; }

  // Gathers into `outs` on the calling thread and calls `done` before returning.
  void LookUp(absl::Span<const int64_t> ids, DataType out_type, RowsOut outs, Done done) override;

 private:
  CpuStore(const TableSource& source, std::unique_ptr<HostRows> rows, int64_t max_batch_ids);

  std::string name_;
  std::string device_ = "cpu";
  int64_t rows_;
  int64_t dim_;
  DataType dtype_;
  int64_t max_batch_ids_;
  std::unique_ptr<HostRows> data_;
};

}  // namespace emb::service

#endif  // EMB_SERVICE_STORE_CPU_STORE_H_
