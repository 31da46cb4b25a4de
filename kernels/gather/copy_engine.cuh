// Row copies through the copy engine (sm_90 and later: cp.async.bulk with mbarriers and L2
// cache policies), for GatherRowOwnersKernel. Private to kernels/; device code only.
#ifndef EMB_KERNELS_GATHER_COPY_ENGINE_CUH_
#define EMB_KERNELS_GATHER_COPY_ENGINE_CUH_

#include <cuda_runtime.h>

#include <cstdint>

namespace emb::kernels::gather {

// These move raw bytes, so they serve only gathers whose table and answer types match; the
// launchers check the rest of their preconditions (row bytes a multiple of 16, both base
// pointers 16-byte aligned). Kernels built on them are empty for targets before sm_90
// (EMB_GATHER_BULK_COPIES unset), where the rule never picks them.

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define EMB_GATHER_BULK_COPIES 1
#endif

// With a cache policy: kStreamingStores and kTableEvictLast (units_kernel.cuh) mean an L2
// evict_first policy on the copy engine's answer stores and evict_last on its table loads.

__device__ __forceinline__ uint32_t SharedAddress(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

#if defined(EMB_GATHER_BULK_COPIES)
// One-arrival mbarrier, visible to the copy engine (the async proxy) once this returns.
__device__ __forceinline__ void InitBarrier(uint64_t* bar) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(SharedAddress(bar)) : "memory");
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

// Arrives on `bar` and has its current phase also wait for `bytes` of copies.
__device__ __forceinline__ void ExpectBytes(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(SharedAddress(bar)),
               "r"(bytes)
               : "memory");
}

// Waits until the phase of `bar` with this parity has completed.
__device__ __forceinline__ void WaitBarrier(uint64_t* bar, uint32_t parity) {
  uint32_t done = 0;
  do {
    asm volatile(
        "{\n"
        ".reg .pred p;\n"
        "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n"
        "}\n"
        : "=r"(done)
        : "r"(SharedAddress(bar)), "r"(parity)
        : "memory");
  } while (done == 0);
  // What the copy engine wrote is read next by the copy engine (a bulk store); order the two.
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

// Copies `bytes` (a multiple of 16; both addresses 16-byte aligned) from global memory to this
// block's shared memory; completes on `bar` (complete_tx).
__device__ __forceinline__ void BulkLoad(void* s_dst, const void* d_src, uint32_t bytes,
                                         uint64_t* bar, bool evict_last, uint64_t policy) {
  if (evict_last) {
    asm volatile(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint"
        " [%0], [%1], %2, [%3], %4;" ::"r"(SharedAddress(s_dst)),
        "l"(d_src), "r"(bytes), "r"(SharedAddress(bar)), "l"(policy)
        : "memory");
  } else {
    asm volatile(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"
        " [%0], [%1], %2, [%3];" ::"r"(SharedAddress(s_dst)),
        "l"(d_src), "r"(bytes), "r"(SharedAddress(bar))
        : "memory");
  }
}

// Copies `bytes` from this block's shared memory to global memory, as one bulk group of the
// calling thread.
__device__ __forceinline__ void BulkStore(void* d_dst, const void* s_src, uint32_t bytes,
                                          bool evict_first, uint64_t policy) {
  if (evict_first) {
    asm volatile(
        "cp.async.bulk.global.shared::cta.bulk_group.L2::cache_hint [%0], [%1], %2, %3;" ::"l"(
            d_dst),
        "r"(SharedAddress(s_src)), "r"(bytes), "l"(policy)
        : "memory");
  } else {
    asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(d_dst),
                 "r"(SharedAddress(s_src)), "r"(bytes)
                 : "memory");
  }
  asm volatile("cp.async.bulk.commit_group;" ::: "memory");
}

// Waits until all but the newest one of this thread's bulk stores have read their shared memory.
__device__ __forceinline__ void WaitStoresReadAllButOne() {
  asm volatile("cp.async.bulk.wait_group.read 1;" ::: "memory");
}

// Waits until all of this thread's bulk stores are complete.
__device__ __forceinline__ void WaitStoresDone() {
  asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
}

__device__ __forceinline__ uint64_t EvictFirstPolicy() {
  uint64_t policy;
  asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
  return policy;
}
__device__ __forceinline__ uint64_t EvictLastPolicy() {
  uint64_t policy;
  asm("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(policy));
  return policy;
}
#endif  // EMB_GATHER_BULK_COPIES

}  // namespace emb::kernels::gather

#endif  // EMB_KERNELS_GATHER_COPY_ENGINE_CUH_
