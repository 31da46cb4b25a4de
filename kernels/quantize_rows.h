// Quantization of rows to the row-wise layouts of kernels/quantize.h (host only), for tables
// quantized at load and for row updates of quantized tables. Thread-safe (no state).
#ifndef EMB_KERNELS_QUANTIZE_ROWS_H_
#define EMB_KERNELS_QUANTIZE_ROWS_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "kernels/data_type.h"

namespace emb {

// Writes `dim` float32 values as one row of the quantized type `t` at `out` (RowBytes(t, dim)
// bytes): each element within half of the row's step, (largest - smallest) / (levels - 1), of
// its original, as kernels/quantize.h says (and where not possible, half its stored scale).
// INVALID_ARGUMENT for a value that is NaN or infinite, or (int4, whose scale and bias are float16)
// a row whose values or range exceed float16's.
absl::Status QuantizeRow(const float* values, int64_t dim, DataType t, std::byte* out);

// Writes `rows` rows of `dim` elements of the value type `in_type` as rows of `table_type` (a
// value type: converted as the gather converts; quantized: QuantizeRow). QuantizeRow's errors,
// naming the row as first_row + its index.
absl::Status EncodeRows(const std::byte* in, DataType in_type, int64_t rows, int64_t dim,
                        DataType table_type, std::byte* out, int64_t first_row = 0);

}  // namespace emb

#endif  // EMB_KERNELS_QUANTIZE_ROWS_H_
