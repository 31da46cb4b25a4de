// The scatter of row updates: writes rows over a table's rows in GPU memory, the gather's inverse
// without a type conversion (the caller converts the rows to the table's type first); and the
// row copies between tiers of a cached table. Host
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
// that every base pointer is aligned to. INVALID_ARGUMENT for a row_bytes of 0, or
// num_ids < 0; otherwise the launch's error (INTERNAL, see CudaStatus).
absl::Status LaunchScatterRows(std::byte* table, size_t row_bytes, const int64_t* ids,
                               const std::byte* rows, int64_t num_ids, cudaStream_t stream);

// Enqueues on `stream` the copy of row src_ids[i] of `src` over row dst_ids[i] of `dst`, for i in
// [0, num_rows); a null id list means row i (LaunchScatterRows is the case of a null src_ids).
// `src` may be mapped pinned host memory (a cache filled from host rows). Destination rows must
// be distinct; rows are as LaunchScatterRows copies them, with its errors (naming
// LaunchCopyRows).
absl::Status LaunchCopyRows(std::byte* dst, const int64_t* dst_ids, const std::byte* src,
                            const int64_t* src_ids, size_t row_bytes, int64_t num_rows,
                            cudaStream_t stream);

}  // namespace emb::kernels

#endif  // EMB_KERNELS_SCATTER_ROWS_H_
