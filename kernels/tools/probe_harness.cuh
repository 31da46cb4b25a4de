// What the standalone kernel probes (write_probe.cu, short_rows_probe.cu) share: a CUDA call
// check that ends the program, and a timer that measures as triton.testing.do_bench does (L2
// flushed by a memset before each call, events around the call alone, the median). Probes only;
// the service and its tests do not use it.
#ifndef EMB_KERNELS_TOOLS_PROBE_HARNESS_CUH_
#define EMB_KERNELS_TOOLS_PROBE_HARNESS_CUH_

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

#define CHECK(x)                                                                              \
  do {                                                                                        \
    cudaError_t e_ = (x);                                                                     \
    if (e_ != cudaSuccess) {                                                                  \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                           \
    }                                                                                         \
  } while (0)

namespace emb::kernels::probes {

class FlushTimer {
 public:
  // Flushes L2 by writing `flush_bytes` (several times the L2) before each timed call.
  explicit FlushTimer(size_t flush_bytes) : flush_bytes_(flush_bytes) {
    CHECK(cudaMalloc(&flush_, flush_bytes));
    CHECK(cudaEventCreate(&start_));
    CHECK(cudaEventCreate(&end_));
  }
  FlushTimer(const FlushTimer&) = delete;
  FlushTimer& operator=(const FlushTimer&) = delete;

  // Median microseconds of `reps` calls of f(rep), each after an L2 flush; two unrecorded calls
  // first.
  float Median(const std::function<void(int)>& f, int reps = 25) {
    f(0);
    f(1);
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
    std::vector<float> us;
    for (int i = 0; i < reps; ++i) {
      CHECK(cudaMemsetAsync(flush_, i & 0xff, flush_bytes_));
      CHECK(cudaEventRecord(start_));
      f(i);
      CHECK(cudaEventRecord(end_));
      CHECK(cudaEventSynchronize(end_));
      float ms = 0;
      CHECK(cudaEventElapsedTime(&ms, start_, end_));
      us.push_back(ms * 1000.0f);
    }
    CHECK(cudaGetLastError());
    std::sort(us.begin(), us.end());
    return us[us.size() / 2];
  }

 private:
  void* flush_ = nullptr;
  size_t flush_bytes_;
  cudaEvent_t start_, end_;
};

}  // namespace emb::kernels::probes

#endif  // EMB_KERNELS_TOOLS_PROBE_HARNESS_CUH_
