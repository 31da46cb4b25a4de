// The CPU gather: copies table rows into a contiguous answer, converting the element type.
// Thread-safe (no state); the reference that the CUDA gather is tested against.
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

}  // namespace emb::kernels

#endif  // EMB_KERNELS_CPU_GATHER_H_
