// round_trip_benchmark's experimental float32 gather (round_trip_probe.cu). Host header.
#ifndef EMB_BENCH_KERNELS_ROUND_TRIP_PROBE_H_
#define EMB_BENCH_KERNELS_ROUND_TRIP_PROBE_H_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace emb::bench::probe {

inline constexpr int kMaxIdsByValue = 256;
struct IdsByValue {
  int64_t ids[kMaxIdsByValue];
};

// Gathers rows of a float32 table (dim a multiple of 4, 16-byte aligned) into `out`. The ids come
// from `host_ids` by value (at most kMaxIdsByValue) when it is not null, else the kernel reads
// them at `ids_ptr`. With `flag` not null, the kernel writes `seq` there once every answer write
// is visible to the host; `blocks_done` is a zeroed device counter for launches of more than one
// block.
cudaError_t LaunchProbeGather(const float* d_table, int dim, const int64_t* ids_ptr,
                              const int64_t* host_ids, int num_ids, float* out,
                              unsigned int* blocks_done, unsigned int* flag, unsigned int seq,
                              cudaStream_t stream);

// A persistent gather: one block that polls `box` (in mapped host memory) for requests, so that
// a batch needs no launch at all. The host writes the ids where `ids` points, then box->num_ids,
// then a new box->request; the kernel writes the rows to `out` (mapped) and, once they are
// visible to the host, box->done = request. request == kMailboxStop ends the kernel.
inline constexpr unsigned int kMailboxStop = 0xffffffffu;
struct Mailbox {
  volatile unsigned int request;
  volatile int num_ids;
  unsigned int pad[14];  // request and done on separate 64-byte lines
  volatile unsigned int done;
};
cudaError_t LaunchPersistentGather(const float* d_table, int dim, const int64_t* ids, float* out,
                                   Mailbox* box, cudaStream_t stream);

}  // namespace emb::bench::probe

#endif  // EMB_BENCH_KERNELS_ROUND_TRIP_PROBE_H_
