// UploadTable: copies a table's rows from its file into GPU memory at start-up, reading and
// copying at once. Called once per GpuStore, from GpuStore::Create's thread; the reader threads it
// starts have all ended when it returns.
#ifndef EMB_SERVICE_STORE_GPU_TABLE_UPLOAD_H_
#define EMB_SERVICE_STORE_GPU_TABLE_UPLOAD_H_

#include <cstddef>

#include "absl/status/statusor.h"
#include "service/common/clock.h"
#include "service/store/gpu/cuda_check.h"
#include "service/store/load_plan.h"
#include "service/tables/table_source.h"

namespace emb::service {

// Copies source.bytes() bytes of `source` to d_table, on check.device() (current on the calling
// thread): plan.readers threads read plan.chunk_bytes chunks into pinned staging buffers (two
// each) while the copies of the chunks already read run on one stream. Returns once every reader
// has ended and every copy is done, failure or not, with the upload's stats (all but `seconds`,
// which the caller measures around its whole load). Errors: the first failure: a read's (naming
// the file and offset), RESOURCE_EXHAUSTED when a reader thread cannot start, or a CUDA error
// through `check` (which reports a lost device). `d_table` must hold source.bytes() bytes.
absl::StatusOr<LoadStats> UploadTable(const TableSource& source, const LoadPlan& plan,
                                      std::byte* d_table, const CudaCheck& check, Clock* clock);

}  // namespace emb::service

#endif  // EMB_SERVICE_STORE_GPU_TABLE_UPLOAD_H_
