// Where the GPU round trip of a small batch goes: the time from the host starting a 16-id gather
// to the host seeing it complete (an event, polled), with the ids and the answer in mapped pinned
// host memory (what GpuStore does for answers up to 256 KiB) or in device memory, and with the
// copy engines instead. Median and 90th percentile of many round trips, one at a time.
//
//   round_trip_benchmark [--ids=16] [--dim=128] [--rounds=3000] [--gap_us=0]
//
// --gap_us: the host spins this long after each round trip before the next, so that every
// round starts on an idle GPU, as a lone caller's batches do in the service.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "bench/common/bench_flags.h"
#include "bench/kernels/round_trip_probe.h"
#include "kernels/cuda_stream.h"
#include "kernels/device_buffer.h"
#include "kernels/lookup.h"

namespace {

using emb::DataType;
using emb::kernels::CudaEvent;
using emb::kernels::CudaStream;
using emb::kernels::DeviceBuffer;
using emb::kernels::PinnedBuffer;

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
  emb::bench::Flags flags(argc, argv);
  const auto num_ids = static_cast<int>(flags.Int("ids", 16, 1));
  const auto dim = static_cast<int>(flags.Int("dim", 128, 1));
  const auto rounds = static_cast<int>(flags.Int("rounds", 3000, 1));
  const auto gap_us = static_cast<int>(flags.Int("gap_us", 0, 0));
  if (!flags.status().ok()) {
    std::fprintf(stderr, "round_trip_benchmark: %s\n", flags.status().ToString().c_str());
    return 2;
  }
  constexpr int64_t kRows = 100000;
  const size_t out_bytes = static_cast<size_t>(num_ids) * dim * sizeof(float);

  Must(emb::kernels::DeviceCount().status());
  const emb::kernels::GatherTuning tuning = Must(emb::kernels::GetGatherTuning(0));
  if (cudaError_t e = cudaSetDevice(0); e != cudaSuccess) Die("cudaSetDevice", e);
  auto d_table = Must(DeviceBuffer<float>::Allocate(static_cast<size_t>(kRows) * dim));
  // Element (r, c) = r + c / 4096: a gathered answer names its rows, so it can be checked.
  auto value = [](int64_t r, int c) {
    return static_cast<float>(r) + static_cast<float>(c) / 4096.0f;
  };
  {
    std::vector<float> table(static_cast<size_t>(kRows) * dim);
    for (int64_t r = 0; r < kRows; ++r) {
      for (int c = 0; c < dim; ++c) {
        table[r * dim + c] = value(r, c);
      }
    }
    if (cudaError_t e =
            cudaMemcpy(d_table.data(), table.data(), d_table.size_bytes(), cudaMemcpyHostToDevice);
        e != cudaSuccess) {
      Die("cudaMemcpy", e);
    }
  }
  // The probe kernel's end flag (mapped) and its count of finished blocks (device).
  auto h_flag = Must(PinnedBuffer<unsigned int>::Allocate(1, cudaHostAllocMapped));
  unsigned int* m_flag = nullptr;
  if (cudaError_t e = cudaHostGetDevicePointer(reinterpret_cast<void**>(&m_flag), h_flag.data(), 0);
      e != cudaSuccess) {
    Die("cudaHostGetDevicePointer", e);
  }
  *h_flag.data() = 0;
  auto d_blocks_done = Must(DeviceBuffer<unsigned int>::Allocate(1));
  if (cudaError_t e = cudaMemset(d_blocks_done.data(), 0, sizeof(unsigned int)); e != cudaSuccess) {
    Die("cudaMemset", e);
  }
  unsigned int seq = 0;
  // The persistent gather's mailbox (mapped), its stream, and whether it runs yet.
  auto h_box = Must(PinnedBuffer<emb::bench::probe::Mailbox>::Allocate(1, cudaHostAllocMapped));
  std::memset(static_cast<void*>(h_box.data()), 0, sizeof(emb::bench::probe::Mailbox));
  emb::bench::probe::Mailbox* m_box = nullptr;
  if (cudaError_t e = cudaHostGetDevicePointer(reinterpret_cast<void**>(&m_box), h_box.data(), 0);
      e != cudaSuccess) {
    Die("cudaHostGetDevicePointer", e);
  }
  CudaStream persistent_stream = Must(CudaStream::Create());
  bool persistent_running = false;
  unsigned int box_seq = 0;
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
  CudaEvent done_blocking = Must(CudaEvent::Create(/*timing=*/true, /*blocking=*/true));
  std::mt19937_64 rng(7);
  std::vector<int64_t> ids(static_cast<size_t>(num_ids));
  if (cudaError_t e =
          cudaMemcpy(d_ids.data(), h_ids.data(), num_ids * sizeof(int64_t), cudaMemcpyHostToDevice);
      e != cudaSuccess) {
    Die("cudaMemcpy", e);
  }

  auto gather = [&](const int64_t* ids_ptr, void* out_ptr) {
    emb::kernels::LookupProblem p;
    p.table = d_table.data();
    p.rows = kRows;
    p.dim = dim;
    p.ids = ids_ptr;
    p.num_bags = num_ids;
    p.out = out_ptr;
    Must(emb::kernels::LaunchLookup(tuning, p, stream.get()));
  };
  auto probe = [&](bool by_value, bool flag) {
    if (cudaError_t e = emb::bench::probe::LaunchProbeGather(
            d_table.data(), dim, m_ids, by_value ? ids.data() : nullptr, num_ids,
            reinterpret_cast<float*>(m_out), d_blocks_done.data(), flag ? m_flag : nullptr, ++seq,
            stream.get());
        e != cudaSuccess) {
      Die("probe", e);
    }
  };
  struct Way {
    const char* name;
    std::function<void()> enqueue;
    // How the host learns the end: the end event, recorded after `enqueue` and polled (default),
    // or waited on asleep (a blocking-sync event), or the kernel's flag, with the event recorded
    // (not waited on) or not at all.
    // kMailbox: the persistent kernel's done flag.
    enum class Wait { kEvent, kBlockingEvent, kFlagAndEvent, kFlag, kMailbox } wait = Wait::kEvent;
    // The probe takes the ids in its launch parameters: at most kMaxIdsByValue of them.
    bool ids_by_value = false;
  };
  const Way ways[] = {
      {"mapped ids, mapped answer, start+end events (GpuStore, small batch)",
       [&] {
         cudaEventRecord(start.get(), stream.get());
         gather(m_ids, m_out);
       }},
      {"mapped ids, mapped answer, start+end events, asleep on the end (blocking-sync event)",
       [&] {
         cudaEventRecord(start.get(), stream.get());
         gather(m_ids, m_out);
       },
       Way::Wait::kBlockingEvent},
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
      {"probe kernel, mapped ids, mapped answer, end event", [&] { probe(false, false); }},
      {"probe kernel, mapped ids, mapped answer, kernel's flag", [&] { probe(false, true); },
       Way::Wait::kFlag},
      {"probe kernel, ids by value, mapped answer, end event", [&] { probe(true, false); },
       Way::Wait::kEvent, /*ids_by_value=*/true},
      {"probe kernel, ids by value, mapped answer, kernel's flag", [&] { probe(true, true); },
       Way::Wait::kFlag, /*ids_by_value=*/true},
      {"probe kernel, ids by value, mapped answer, kernel's flag (end event recorded too)",
       [&] { probe(true, true); }, Way::Wait::kFlagAndEvent, /*ids_by_value=*/true},
      {"probe kernel, mapped ids, mapped answer, kernel's flag, start event",
       [&] {
         cudaEventRecord(start.get(), stream.get());
         probe(false, true);
       },
       Way::Wait::kFlag},
      {"persistent kernel (no launch): mapped ids, mapped answer, mailbox's done flag",
       [&] {
         if (!persistent_running) {
           if (cudaError_t e = emb::bench::probe::LaunchPersistentGather(
                   d_table.data(), dim, m_ids, reinterpret_cast<float*>(m_out), m_box,
                   persistent_stream.get());
               e != cudaSuccess) {
             Die("persistent kernel", e);
           }
           persistent_running = true;
         }
         h_box.data()->num_ids = num_ids;
         std::atomic_thread_fence(std::memory_order_release);
         h_box.data()->request = ++box_seq;
       },
       Way::Wait::kMailbox},
  };

  std::printf(
      "GPU round trip of one %d x %d float32 gather, host start to host seeing the end "
      "event (polled); %d rounds each, %d us apart, microseconds\n\n",
      num_ids, dim, rounds, gap_us);
  std::printf("| way | median | p90 | min |\n| --- | ---: | ---: | ---: |\n");
  for (const Way& way : ways) {
    if (way.ids_by_value && num_ids > emb::bench::probe::kMaxIdsByValue) {
      continue;
    }
    int64_t wrong = 0;  // answers that did not hold their rows when the flag was seen
    std::vector<double> us;
    us.reserve(static_cast<size_t>(rounds));
    for (int r = -rounds / 10; r < rounds; ++r) {  // the first tenth warms up
      for (int64_t& id : ids) {
        id = static_cast<int64_t>(rng() % kRows);
      }
      const auto t0 = std::chrono::steady_clock::now();
      std::memcpy(h_ids.data(), ids.data(), ids.size() * sizeof(int64_t));
      way.enqueue();
      if (way.wait == Way::Wait::kBlockingEvent) {
        cudaEventRecord(done_blocking.get(), stream.get());
        if (cudaError_t e = cudaEventSynchronize(done_blocking.get()); e != cudaSuccess) {
          Die(way.name, e);
        }
      } else if (way.wait != Way::Wait::kFlag) {
        cudaEventRecord(done.get(), stream.get());
      }
      if (way.wait == Way::Wait::kEvent) {
        cudaError_t e;
        while ((e = cudaEventQuery(done.get())) == cudaErrorNotReady) {
        }
        if (e != cudaSuccess) Die(way.name, e);
      } else if (way.wait == Way::Wait::kMailbox) {
        while (h_box.data()->done != box_seq) {
        }
        std::atomic_thread_fence(std::memory_order_acquire);
      } else if (way.wait != Way::Wait::kBlockingEvent) {
        const volatile unsigned int* flag = h_flag.data();
        while (*flag != seq) {
        }
      }
      const auto t1 = std::chrono::steady_clock::now();
      if (way.wait == Way::Wait::kFlag || way.wait == Way::Wait::kFlagAndEvent ||
          way.wait == Way::Wait::kMailbox) {
        const auto* out = reinterpret_cast<const volatile float*>(h_out.data());
        for (int i = 0; i < num_ids; ++i) {
          if (out[static_cast<size_t>(i) * dim] != value(ids[i], 0) ||
              out[static_cast<size_t>(i) * dim + dim - 1] != value(ids[i], dim - 1)) {
            ++wrong;
            break;
          }
        }
        if (cudaError_t e = cudaStreamSynchronize(stream.get()); e != cudaSuccess) {
          Die(way.name, e);
        }
      }
      if (r >= 0) {
        us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
      }
      while (std::chrono::steady_clock::now() - t1 < std::chrono::microseconds(gap_us)) {
      }
    }
    std::sort(us.begin(), us.end());
    std::printf(
        "| %s | %.1f | %.1f | %.1f |%s\n", way.name, us[us.size() / 2], us[us.size() * 9 / 10],
        us.front(),
        wrong > 0 ? (" " + std::to_string(wrong) + " answers incomplete at the flag").c_str() : "");
  }
  if (persistent_running) {
    h_box.data()->request = emb::bench::probe::kMailboxStop;
    if (cudaError_t e = cudaStreamSynchronize(persistent_stream.get()); e != cudaSuccess) {
      Die("persistent kernel", e);
    }
  }
  return 0;
}
