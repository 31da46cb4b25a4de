// The CUDA gather: copies table rows picked by ids into a contiguous answer on
// a stream, converting the element type (float32, float16, bfloat16) with the
// same rounding as CpuGather.
//
// Built only where CUDA was found (EMB_HAVE_CUDA). Thread-safe: no state; each
// call enqueues work on the caller's stream. Host header: the only CUDA header
// it includes is <cuda_runtime_api.h>.
#ifndef EMB_KERNELS_EMBEDDING_LOOKUP_H_
#define EMB_KERNELS_EMBEDDING_LOOKUP_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/data_type.h"
#include "kernels/gather_tuning.h"  // GatherTuning

namespace emb::kernels {

// The number of CUDA devices. INTERNAL (with the CUDA error name, e.g.
// cudaErrorNoDevice or cudaErrorInsufficientDriver) when the runtime cannot
// count them, e.g. on a machine without a GPU or driver.
absl::StatusOr<int> DeviceCount();

// Reads `device`'s properties and the gather kernels' occupancy on it. The
// calling thread's current device is unchanged afterwards. INVALID_ARGUMENT for
// a device out of range; INTERNAL for other CUDA errors.
absl::StatusOr<GatherTuning> GetGatherTuning(int device);

// Enqueues on `stream`: row d_ids[i] of d_table (num_rows rows of table_type; a
// quantized table's rows are dequantized by the bag kernel, kernels/pooled_lookup.h),
// converted to out_type (a value type) (round to nearest even, bit for bit the
// results of CpuGather), at d_out + i * dim * ElementSize(out_type), for i in
// [0, num_ids).
//
// Ids must be in [0, num_rows) (checked on the host by the caller: an id out of
// range reads arbitrary memory). num_ids == 0 is a no-op. d_table, d_ids and
// d_out must stay valid until the work on `stream` completes; d_out must not
// overlap d_table or d_ids. The current device must be tuning.device. No
// allocation, no synchronization (unless built with EMB_CUDA_DEBUG_SYNC, which
// adds a cudaStreamSynchronize to surface kernel faults at the call).
//
// The kernel and its launch are the rule's (PlanGather, gather_plan.h). Rows
// whose byte length and base pointers allow it move as 16-byte vectors; others
// as 8, 4 or 2 bytes (any dim works). INVALID_ARGUMENT for a bad dtype,
// dim < 1, num_rows < 0, num_ids < 0, or null pointers with num_ids > 0;
// FAILED_PRECONDITION for a tuning not from GetGatherTuning or of another
// device than the current one; INTERNAL for a CUDA error seen at the launch
// (cudaPeekAtLastError, which also reports a sticky fault of earlier work); a
// sticky one (IsStickyCudaError, e.g. IsStickyCudaError(cudaPeekAtLastError()))
// means the context is dead.
absl::Status LaunchGather(const GatherTuning& tuning, const void* d_table, DataType table_type,
                          int64_t num_rows, int64_t dim, const int64_t* d_ids, int64_t num_ids,
                          void* d_out, DataType out_type, cudaStream_t stream);

}  // namespace emb::kernels

#endif  // EMB_KERNELS_EMBEDDING_LOOKUP_H_
