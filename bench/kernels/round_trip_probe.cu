// A float32 gather for round_trip_benchmark's experiments only: it can take its ids by value (in
// the launch's parameters, so the kernel makes no dependent read of host memory for them) and
// can announce its own end by writing a flag into mapped host memory, which the host polls
// instead of an event. Not used by the service.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "bench/kernels/round_trip_probe.h"

namespace emb::bench::probe {
namespace {

constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads)
    ProbeGatherKernel(const float4* __restrict__ table, uint32_t row_units,
                      const int64_t* __restrict__ ids_ptr, IdsByValue ids_val, bool by_value,
                      uint32_t total_units, float4* __restrict__ out, unsigned int* blocks_done,
                      volatile unsigned int* flag, unsigned int seq) {
  for (uint32_t u = blockIdx.x * kThreads + threadIdx.x; u < total_units;
       u += gridDim.x * kThreads) {
    const uint32_t row = u / row_units;
    const uint32_t col = u - row * row_units;
    const int64_t id = by_value ? ids_val.ids[row] : __ldg(ids_ptr + row);
    out[u] = __ldg(table + (static_cast<uint64_t>(id) * row_units + col));
  }
  if (flag == nullptr) {
    return;
  }
  // Every thread's answer writes are ordered before the barrier, and so before thread 0's count.
  __threadfence_system();
  __syncthreads();
  if (threadIdx.x != 0) {
    return;
  }
  if (gridDim.x > 1) {
    if (atomicAdd(blocks_done, 1u) != gridDim.x - 1) {
      return;
    }
    *blocks_done = 0;  // the last block resets the count for the next launch
    __threadfence_system();
  }
  *flag = seq;
}

__global__ void __launch_bounds__(kThreads)
    PersistentGatherKernel(const float4* __restrict__ table, uint32_t row_units, const int64_t* ids,
                           float4* out, Mailbox* box) {
  __shared__ unsigned int request;
  __shared__ uint32_t total_units;
  unsigned int last = 0;
  for (;;) {
    if (threadIdx.x == 0) {
      unsigned int r;
      while ((r = box->request) == last) {
      }
      __threadfence_system();  // the ids and count are read after the request that names them
      request = r;
      total_units = static_cast<uint32_t>(box->num_ids) * row_units;
    }
    __syncthreads();
    const unsigned int r = request;
    if (r == kMailboxStop) {
      return;
    }
    last = r;
    for (uint32_t u = threadIdx.x; u < total_units; u += kThreads) {
      const uint32_t row = u / row_units;
      const uint32_t col = u - row * row_units;
      // Never a cached copy of an earlier request's ids.
      const int64_t id = __ldcv(reinterpret_cast<const long long*>(ids) + row);
      out[u] = __ldg(table + (static_cast<uint64_t>(id) * row_units + col));
    }
    __threadfence_system();
    __syncthreads();  // every row written before the flag; `request` read by all before reuse
    if (threadIdx.x == 0) {
      box->done = r;
    }
  }
}

}  // namespace

cudaError_t LaunchPersistentGather(const float* d_table, int dim, const int64_t* ids, float* out,
                                   Mailbox* box, cudaStream_t stream) {
  PersistentGatherKernel<<<1, kThreads, 0, stream>>>(reinterpret_cast<const float4*>(d_table),
                                                     static_cast<uint32_t>(dim / 4), ids,
                                                     reinterpret_cast<float4*>(out), box);
  return cudaPeekAtLastError();
}

cudaError_t LaunchProbeGather(const float* d_table, int dim, const int64_t* ids_ptr,
                              const int64_t* host_ids, int num_ids, float* out,
                              unsigned int* blocks_done, unsigned int* flag, unsigned int seq,
                              cudaStream_t stream) {
  IdsByValue ids_val;
  const bool by_value = host_ids != nullptr;
  if (by_value) {
    if (num_ids > kMaxIdsByValue) {
      return cudaErrorInvalidValue;
    }
    for (int i = 0; i < num_ids; ++i) {
      ids_val.ids[i] = host_ids[i];
    }
  }
  const uint32_t row_units = static_cast<uint32_t>(dim / 4);
  const uint32_t total_units = row_units * static_cast<uint32_t>(num_ids);
  const int blocks =
      static_cast<int>(std::min<uint32_t>((total_units + 2 * kThreads - 1) / (2 * kThreads), 132));
  ProbeGatherKernel<<<blocks, kThreads, 0, stream>>>(
      reinterpret_cast<const float4*>(d_table), row_units, ids_ptr, ids_val, by_value, total_units,
      reinterpret_cast<float4*>(out), blocks_done, flag, seq);
  return cudaPeekAtLastError();
}

}  // namespace emb::bench::probe
