// api_call_cost: how long the CUDA runtime calls on a batch's path take on the host, alone (each
// 20,000 times in a hot loop on an otherwise idle host, median, one thread). A standalone probe;
// what it found is in docs/runs/h200_device_view_40_42.md (call 6).
//
//   nvcc -O2 -arch=sm_90 -o api_call_cost kernels/tools/api_call_cost.cu
//   ./api_call_cost
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <vector>
static double Median(const std::function<void()>& f, int n) {
  std::vector<double> us(n);
  for (int i = 0; i < n; ++i) {
    auto a = std::chrono::steady_clock::now();
    f();
    us[i] = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - a).count();
  }
  std::sort(us.begin(), us.end());
  return us[n / 2];
}
__global__ void Empty() {}
int main() {
  cudaSetDevice(0);
  cudaFree(0);
  void* h = nullptr;
  cudaHostAlloc(&h, 1 << 20, cudaHostAllocMapped | cudaHostAllocPortable);
  cudaStream_t s;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  cudaEvent_t e;
  cudaEventCreate(&e);
  cudaEvent_t e2;
  cudaEventCreateWithFlags(&e2, cudaEventDisableTiming);
  const int n = 20000;
  std::printf("| call | median us |\n| --- | ---: |\n");
  std::printf("| cudaSetDevice(0), already current | %.3f |\n",
              Median([] { cudaSetDevice(0); }, n));
  std::printf("| cudaGetDevice | %.3f |\n", Median(
                                                [] {
                                                  int d;
                                                  cudaGetDevice(&d);
                                                },
                                                n));
  std::printf("| cudaPointerGetAttributes (pinned) | %.3f |\n", Median(
                                                                    [&] {
                                                                      cudaPointerAttributes a;
                                                                      cudaPointerGetAttributes(&a,
                                                                                               h);
                                                                    },
                                                                    n));
  std::printf("| cudaEventRecord (timing) | %.3f |\n", Median([&] { cudaEventRecord(e, s); }, n));
  cudaStreamSynchronize(s);
  std::printf("| cudaEventRecord (no timing) | %.3f |\n",
              Median([&] { cudaEventRecord(e2, s); }, n));
  cudaStreamSynchronize(s);
  std::printf("| empty kernel launch | %.3f |\n", Median([&] { Empty<<<1, 32, 0, s>>>(); }, n));
  cudaStreamSynchronize(s);
  std::printf("| cudaEventQuery (done) | %.3f |\n", Median([&] { cudaEventQuery(e); }, n));
  std::printf("| cudaPeekAtLastError | %.3f |\n", Median([] { cudaPeekAtLastError(); }, n));
  return 0;
}
