// The CUDA bag kernel: pooled lookups (sum, weighted sum, mean of each bag's rows) over tables of
// every type, and the dequantizing gather of quantized tables.
//
// One kernel family (kernels/bags/) serves both: a group of lanes owns one bag and a tile of its
// columns, loads the bag's rows several at a time with the widest loads the row layout allows,
// accumulates in float32 in id order (one rounding per product and per sum: bit for bit
// CpuPooledGather's results) and writes the tile once, rounded to the answer type. A plain gather
// is the case of bags of one id each (no offsets).
//
// Built only where CUDA was found. Thread-safe: no state; each call enqueues one kernel on the
// caller's stream, allocates nothing and does not synchronize.
#ifndef EMB_KERNELS_POOLED_LOOKUP_H_
#define EMB_KERNELS_POOLED_LOOKUP_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/status.h"
#include "kernels/data_type.h"
#include "kernels/device_bags.h"  // DeviceBags

namespace emb::kernels {

// Enqueues on `stream` the pooling of `bags` (CpuPooledGather's results, bit for bit). Ids must be
// in [0, rows) and offsets must not decrease (the caller checked both). For a table in two tiers
// (bags.cached.slots set) each row comes from the cache or the host rows as its slot says, and
// the rows read from the host are added to bags.cached.misses where given. INVALID_ARGUMENT for a
// bad type, dim < 1, num_bags < 0, null pointers where num_bags > 0, or a cache
// without slots or slots without a cache; INTERNAL for a CUDA error
// seen at the launch.
absl::Status LaunchBags(const DeviceBags& bags, cudaStream_t stream);

// The dequantizing gather of a quantized table: row ids[i] at out + i * dim *
// ElementSize(out_type) (LaunchBags with bags of one id).
absl::Status LaunchQuantizedGather(const void* d_table, DataType table_type, int64_t num_rows,
                                   int64_t dim, const int64_t* d_ids, int64_t num_ids, void* d_out,
                                   DataType out_type, cudaStream_t stream);

}  // namespace emb::kernels

#endif  // EMB_KERNELS_POOLED_LOOKUP_H_
