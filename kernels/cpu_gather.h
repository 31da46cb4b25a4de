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

// Writes row ids[i] of `table` (rows x dim elements of `table_type`), converted to `out_type`,
// at out + i * dim * ElementSize(out_type). Ids must be in [0, rows): the caller checked them.
// `out` must not overlap `table`.
void CpuGather(const std::byte* table, DataType table_type, int64_t dim,
               absl::Span<const int64_t> ids, DataType out_type, std::byte* out);

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
