// Where the GPU round trip of a small batch goes: the time from the host starting a 16-id gather
// to the host seeing it complete (an event, polled), with the ids and the answer in mapped pinned
// host memory (what GpuStore does for answers up to 256 KiB) or in device memory, and with the
// copy engines instead. Median and 90th percentile of many round trips, one at a time.
//
//   round_trip_benchmark [--ids=16] [--dim=128] [--rounds=3000]
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "kernels/cuda_stream.h"
#include "kernels/device_buffer.h"
#include "kernels/embedding_lookup.h"

namespace {

using emb::DataType;
using emb::kernels::CudaEvent;
using emb::kernels::CudaStream;
using emb::kernels::DeviceBuffer;
using emb::kernels::PinnedBuffer;

int Flag(int argc, char** argv, const char* name, int fallback) {
  const std::string prefix = std::string("--") + name + "=";
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], prefix.c_str(), prefix.size()) == 0) {
      return std::atoi(argv[i] + prefix.size());
    }
  }
  return fallback;
}

void Die(const char* what, cudaError_t e) {
  std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorName(e));
  std::exit(1);
}

template <typename T>
T Must(absl::StatusOr<T> v) {
  if (!v.ok()) {
    std::fprintf(stderr, "%s\n", v.status().ToString().c_str());
    std::exit(1);
  }
  return *std::move(v);
}

void Must(const absl::Status& s) {
  if (!s.ok()) {
    std::fprintf(stderr, "%s\n", s.ToString().c_str());
    std::exit(1);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const int num_ids = Flag(argc, argv, "ids", 16);
  const int dim = Flag(argc, argv, "dim", 128);
  const int rounds = Flag(argc, argv, "rounds", 3000);
  constexpr int64_t kRows = 100000;
  const size_t out_bytes = static_cast<size_t>(num_ids) * dim * sizeof(float);

  Must(emb::kernels::DeviceCount().status());
  const emb::kernels::GatherTuning tuning = Must(emb::kernels::GetGatherTuning(0));
  if (cudaError_t e = cudaSetDevice(0); e != cudaSuccess) Die("cudaSetDevice", e);
  auto d_table = Must(DeviceBuffer<float>::Allocate(static_cast<size_t>(kRows) * dim));
  if (cudaError_t e = cudaMemset(d_table.data(), 0x3f, d_table.size_bytes()); e != cudaSuccess) {
    Die("cudaMemset", e);
  }
  constexpr unsigned kMapped = cudaHostAllocMapped | cudaHostAllocPortable;
  auto h_ids = Must(PinnedBuffer<int64_t>::Allocate(num_ids, kMapped));
  auto h_out = Must(PinnedBuffer<std::byte>::Allocate(out_bytes, kMapped));
  auto d_ids = Must(DeviceBuffer<int64_t>::Allocate(num_ids));
  auto d_out = Must(DeviceBuffer<std::byte>::Allocate(out_bytes));
  int64_t* m_ids = nullptr;  // the mapped buffers as the device sees them
  std::byte* m_out = nullptr;
  if (cudaError_t e = cudaHostGetDevicePointer(reinterpret_cast<void**>(&m_ids), h_ids.data(), 0);
      e != cudaSuccess) {
    Die("cudaHostGetDevicePointer", e);
  }
  if (cudaError_t e = cudaHostGetDevicePointer(reinterpret_cast<void**>(&m_out), h_out.data(), 0);
      e != cudaSuccess) {
    Die("cudaHostGetDevicePointer", e);
  }
  CudaStream stream = Must(CudaStream::Create());
  CudaEvent start = Must(CudaEvent::Create(/*timing=*/true));
  CudaEvent done = Must(CudaEvent::Create(/*timing=*/true));
  std::mt19937_64 rng(7);
  std::vector<int64_t> ids(static_cast<size_t>(num_ids));
  if (cudaError_t e =
          cudaMemcpy(d_ids.data(), h_ids.data(), num_ids * sizeof(int64_t), cudaMemcpyHostToDevice);
      e != cudaSuccess) {
    Die("cudaMemcpy", e);
  }

  auto gather = [&](const int64_t* ids_ptr, void* out_ptr) {
    Must(emb::kernels::LaunchGather(tuning, d_table.data(), DataType::kFloat32, kRows, dim, ids_ptr,
                                    num_ids, out_ptr, DataType::kFloat32, stream.get()));
  };
  struct Way {
    const char* name;
    std::function<void()> enqueue;
  };
  const Way ways[] = {
      {"mapped ids, mapped answer, start+end events (GpuStore, small batch)",
       [&] {
         cudaEventRecord(start.get(), stream.get());
         gather(m_ids, m_out);
       }},
      {"mapped ids, mapped answer, end event only", [&] { gather(m_ids, m_out); }},
      {"device ids, mapped answer", [&] { gather(d_ids.data(), m_out); }},
      {"mapped ids, device answer", [&] { gather(m_ids, d_out.data()); }},
      {"device ids, device answer (the kernel alone)", [&] { gather(d_ids.data(), d_out.data()); }},
      {"copy ids in, gather, copy answer out (GpuStore, large batch)",
       [&] {
         cudaEventRecord(start.get(), stream.get());
         cudaMemcpyAsync(d_ids.data(), h_ids.data(), num_ids * sizeof(int64_t),
                         cudaMemcpyHostToDevice, stream.get());
         gather(d_ids.data(), d_out.data());
         cudaMemcpyAsync(h_out.data(), d_out.data(), out_bytes, cudaMemcpyDeviceToHost,
                         stream.get());
       }},
      {"an empty event pair (the floor of a round trip)",
       [&] { cudaEventRecord(start.get(), stream.get()); }},
  };

  std::printf(
      "GPU round trip of one %d x %d float32 gather, host start to host seeing the end "
      "event (polled); %d rounds each, microseconds\n\n",
      num_ids, dim, rounds);
  std::printf("| way | median | p90 | min |\n| --- | ---: | ---: | ---: |\n");
  for (const Way& way : ways) {
    std::vector<double> us;
    us.reserve(static_cast<size_t>(rounds));
    for (int r = -rounds / 10; r < rounds; ++r) {  // the first tenth warms up
      for (int64_t& id : ids) {
        id = static_cast<int64_t>(rng() % kRows);
      }
      const auto t0 = std::chrono::steady_clock::now();
      std::memcpy(h_ids.data(), ids.data(), ids.size() * sizeof(int64_t));
      way.enqueue();
      cudaEventRecord(done.get(), stream.get());
      cudaError_t e;
      while ((e = cudaEventQuery(done.get())) == cudaErrorNotReady) {
      }
      if (e != cudaSuccess) Die(way.name, e);
      const auto t1 = std::chrono::steady_clock::now();
      if (r >= 0) {
        us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
      }
    }
    std::sort(us.begin(), us.end());
    std::printf("| %s | %.1f | %.1f | %.1f |\n", way.name, us[us.size() / 2],
                us[us.size() * 9 / 10], us.front());
  }
  return 0;
}
