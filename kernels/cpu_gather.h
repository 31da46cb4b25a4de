// The CPU gather: copies table rows into a contiguous answer, converting the element type; and
// its inverse for row updates, the scatter. Thread-safe (no state); the reference that the CUDA
// gather is tested against.
#ifndef EMB_KERNELS_CPU_GATHER_H_
#define EMB_KERNELS_CPU_GATHER_H_

#include <cstddef>
#include <cstdint>

#include "absl/types/span.h"
#include "kernels/data_type.h"

namespace emb::kernels {

// Writes row ids[i] of `table` (rows of `table_type`, RowBytes(table_type, dim) bytes each;
// quantized rows are dequantized, kernels/quantize.h), converted to the value type `out_type`, at
// out + i * dim * ElementSize(out_type). Ids must be in [0, rows): the caller checked them.
// `out` must not overlap `table`.
void CpuGather(const std::byte* table, DataType table_type, int64_t dim,
               absl::Span<const int64_t> ids, DataType out_type, std::byte* out);

// Bags of ids to pool (PyTorch's embedding_bag, FBGEMM's CSR form): bag b is
// ids[offsets[b] .. offsets[b + 1]); offsets.size() is bags + 1 and offsets never decrease.
struct Bags {
  absl::Span<const int64_t> ids;
  absl::Span<const int64_t> offsets;
  // Empty, or one weight per id (by its index in `ids`): each row is multiplied by its weight.
  absl::Span<const float> weights;
  // Empty, or one factor per bag applied to its sum (a mean: 1 / its length; 0 for an empty bag).
  absl::Span<const float> scales;
};

// Writes bag b's pooled row at out + b * dim * ElementSize(out_type): the sum over its ids of
// (weight x) row, accumulated in float32 in id order (one rounding per product and per sum, as
// the CUDA kernel), times the bag's scale, rounded once to `out_type`. An empty bag gives zeros.
// Ids must be in [0, rows).
void CpuPooledGather(const std::byte* table, DataType table_type, int64_t dim, const Bags& bags,
                     DataType out_type, std::byte* out);

// Writes `count` elements of `in_type` at `in` to `out` as `out_type`, converted as the gather
// converts (round to nearest even). `out` must not overlap `in`.
void CpuConvert(const std::byte* in, DataType in_type, int64_t count, DataType out_type,
                std::byte* out);

// Writes rows[i] (dim elements of `rows_type`), converted to `table_type`, over row ids[i] of
// `table`, in order: an id given twice keeps its last row. Ids must be in [0, rows).
void CpuScatter(const std::byte* rows, DataType rows_type, int64_t dim,
                absl::Span<const int64_t> ids, std::byte* table, DataType table_type);

}  // namespace emb::kernels

#endif  // EMB_KERNELS_CPU_GATHER_H_
