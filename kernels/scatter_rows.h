// The scatter of row updates: writes rows over a table's rows in GPU memory, the gather's inverse
// without a type conversion (the caller converts the rows to the table's type first). Host
// header; thread-safe (no state).
#ifndef EMB_KERNELS_SCATTER_ROWS_H_
#define EMB_KERNELS_SCATTER_ROWS_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"

namespace emb::kernels {

// Enqueues on `stream` the copy of rows[i] (row_bytes each, consecutive) over row ids[i] of
// `table`, for i in [0, num_ids). `ids` and `rows` are memory the device reads (device memory, or
// mapped pinned host memory); ids must be distinct and in the table (the caller checked them: two
// equal ids would race). Copies in the widest unit (16, 8, 4 or 2 bytes) that divides the row and
// that every base pointer is aligned to. INVALID_ARGUMENT for a row_bytes that is 0 or odd, or
// num_ids < 0; otherwise the launch's error (INTERNAL, see CudaStatus).
absl::Status LaunchScatterRows(std::byte* table, size_t row_bytes, const int64_t* ids,
                               const std::byte* rows, int64_t num_ids, cudaStream_t stream);

}  // namespace emb::kernels

#endif  // EMB_KERNELS_SCATTER_ROWS_H_
