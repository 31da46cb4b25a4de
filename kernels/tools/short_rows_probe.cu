// short_rows_probe: where the gather of short rows loses time. A standalone experiment for the
// (32, 512, 768) leaderboard cases (16384 answer rows of 3 KB in float32, 1.5 KB in float16:
// a 50 MB or 25 MB answer, written in 12 to 20 us), where the production kernel (GatherUnitsKernel)
// measured 1.17x to 1.40x the floor and within 2% of torch.compile. Times, like
// triton.testing.do_bench (L2 flushed by a 256 MB memset before each call, events around the call
// alone, median): the answer's memset and a same-bytes device copy (what writing the answer costs
// at best), the production kernel at its four unroll levels, and a warp-per-row gather (one id
// per row, read a group ahead, R rows in flight per warp) over a persistent or a full grid. Every
// gather is checked byte for byte against a host gather. Not used by the service.
//
//   nvcc -O3 -std=c++17 -arch=sm_90 -I. -o short_rows_probe kernels/tools/short_rows_probe.cu
//   ./short_rows_probe [reps]
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "kernels/gather/units_kernel.cuh"
#include "kernels/tools/probe_harness.cuh"

namespace {

using emb::kernels::gather::F16;
using emb::kernels::gather::F32;
using emb::kernels::gather::FastDivmod;
using emb::kernels::gather::GatherArgs;
using emb::kernels::gather::GatherUnitsKernel;
using emb::kernels::gather::kBlockThreads;
using emb::kernels::gather::kMinBlocksPerSm;
using emb::kernels::gather::kStreamingStores;
using emb::kernels::gather::kTableEvictLast;
using emb::kernels::gather::LoadTable;
using emb::kernels::probes::FlushTimer;

constexpr int64_t kIds = 32 * 512;

// Warp w copies answer rows [w * kRows, w * kRows + kRows), then the same rows one grid of warps
// further on: lane k < kRows holds id k of the group (read one group ahead, so that the table loads
// never wait on an id load), and every lane copies units lane, lane + 32, ... of each row. All
// kRows * kPerLane loads are issued before the first store.
template <int kPerLane, int kRows>
__global__ void __launch_bounds__(256)
    WarpRows(const uint4* __restrict__ table, const int64_t* __restrict__ ids, int64_t num_ids,
             uint4* __restrict__ out, bool evict_last) {
  constexpr int kRowUnits = kPerLane * 32;
  const int lane = threadIdx.x & 31;
  const int64_t warps = (int64_t{gridDim.x} * blockDim.x) >> 5;
  const int64_t step = warps * kRows;
  uint64_t policy = 0;
  if (evict_last) {
    asm("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(policy));
  }
  int64_t base = ((int64_t{blockIdx.x} * blockDim.x + threadIdx.x) >> 5) * kRows;
  int64_t next = (lane < kRows && base + lane < num_ids) ? __ldg(ids + base + lane) : 0;
  for (; base < num_ids; base += step) {
    const int64_t mine = next;
    const int64_t ahead = base + step + lane;
    next = (lane < kRows && ahead < num_ids) ? __ldg(ids + ahead) : 0;
    uint4 v[kRows][kPerLane];
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const int64_t id = __shfl_sync(0xffffffffu, mine, r);
      if (base + r < num_ids) {
        const uint4* row = table + id * kRowUnits + lane;
#pragma unroll
        for (int k = 0; k < kPerLane; ++k) {
          v[r][k] = LoadTable(row + 32 * k, evict_last, policy);
        }
      }
    }
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      if (base + r < num_ids) {
        uint4* row = out + (base + r) * kRowUnits + lane;
#pragma unroll
        for (int k = 0; k < kPerLane; ++k) {
          __stcs(row + 32 * k, v[r][k]);
        }
      }
    }
  }
}

struct Case {
  const char* type;
  int row_bytes;
};

template <typename T, int kN, int kLevel>
void LaunchUnits(int sms, const void* table, const int64_t* ids, void* out, int row_bytes) {
  constexpr int kUnroll = 1 << kLevel;
  constexpr int64_t kTile = int64_t{kBlockThreads} * kUnroll;
  const int64_t row_units = row_bytes / 16;
  const int64_t total = kIds * row_units;
  const int64_t tiles = (total + kTile - 1) / kTile;
  const int64_t cap = int64_t{sms} * kMinBlocksPerSm<kUnroll, 16> * 64;
  const int64_t blocks = std::min(tiles, cap);
  GatherArgs args;
  args.units_per_row = FastDivmod::Make(static_cast<uint32_t>(row_units));
  args.total_units = static_cast<uint32_t>(total);
  args.block_stride = static_cast<uint32_t>(kTile);
  args.tile_stride = static_cast<uint32_t>(blocks * kTile);
  args.share_units = 0;
  args.flags = kStreamingStores | kTableEvictLast;
  GatherUnitsKernel<T, T, kN, kUnroll><<<static_cast<unsigned>(blocks), kBlockThreads>>>(
      static_cast<const uint4*>(table), ids, args, static_cast<uint4*>(out));
}

template <int kPerLane, int kRows>
void LaunchWarpRows(int grid, const void* table, const int64_t* ids, void* out) {
  WarpRows<kPerLane, kRows>
      <<<grid, 256>>>(static_cast<const uint4*>(table), ids, kIds, static_cast<uint4*>(out), true);
}

template <int kPerLane, int kRows>
int ResidentBlocks(int sms) {
  int per_sm = 0;
  CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, WarpRows<kPerLane, kRows>, 256, 0));
  return per_sm * sms;
}

template <int kPerLane>
void RunCase(const Case& c, int sms, FlushTimer& timer, int reps) {
  const int row_bytes = c.row_bytes;
  const size_t answer_bytes = size_t{kIds} * row_bytes;
  std::mt19937_64 rng(7);
  int64_t* d_ids = nullptr;
  void *d_table = nullptr, *d_out = nullptr, *d_copy_src = nullptr;
  CHECK(cudaMalloc(&d_ids, kIds * 8));
  CHECK(cudaMalloc(&d_out, answer_bytes));
  CHECK(cudaMalloc(&d_copy_src, answer_bytes));
  std::vector<uint8_t> got(answer_bytes), want(answer_bytes);
  std::printf("\n### %s rows of %d bytes, %lld ids (answer %.1f MB)\n\n", c.type, row_bytes,
              static_cast<long long>(kIds), answer_bytes / 1e6);
  std::printf(
      "| vocab | memset us | copy us | units L0 | units L1 (production) | units L2 | "
      "units L3 | warp 1 row persistent | warp 2 rows persistent | warp 4 rows "
      "persistent | warp 1 row full | warp 2 rows full | best / units L1 | exact |\n");
  std::printf(
      "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | "
      "---: | ---: | --- |\n");
  for (int64_t vocab = 1024; vocab <= 131072; vocab *= 2) {
    const size_t table_bytes = size_t(vocab) * row_bytes;
    std::vector<uint8_t> h_table(table_bytes);
    for (auto& b : h_table) b = static_cast<uint8_t>(rng());
    std::vector<int64_t> h_ids(kIds);
    std::uniform_int_distribution<int64_t> pick(0, vocab - 1);
    for (auto& id : h_ids) id = pick(rng);
    for (int64_t i = 0; i < kIds; ++i) {
      std::memcpy(want.data() + i * row_bytes, h_table.data() + h_ids[i] * row_bytes, row_bytes);
    }
    CHECK(cudaMalloc(&d_table, table_bytes));
    CHECK(cudaMemcpy(d_table, h_table.data(), table_bytes, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(d_ids, h_ids.data(), kIds * 8, cudaMemcpyHostToDevice));

    bool exact = true;
    auto gather = [&](const std::function<void()>& fn) {
      CHECK(cudaMemset(d_out, 0, answer_bytes));
      fn();
      CHECK(cudaDeviceSynchronize());
      CHECK(cudaMemcpy(got.data(), d_out, answer_bytes, cudaMemcpyDeviceToHost));
      exact = exact && std::memcmp(got.data(), want.data(), answer_bytes) == 0;
      return timer.Median([&](int) { fn(); }, reps);
    };
    using T = std::conditional_t<kPerLane == 6, F32, F16>;
    constexpr int kN = 16 / sizeof(typename T::Bits);
    std::vector<double> us;
    us.push_back(timer.Median([&](int) { CHECK(cudaMemsetAsync(d_out, 1, answer_bytes)); }, reps));
    us.push_back(timer.Median(
        [&](int) {
          CHECK(cudaMemcpyAsync(d_out, d_copy_src, answer_bytes, cudaMemcpyDeviceToDevice));
        },
        reps));
    us.push_back(gather([&] { LaunchUnits<T, kN, 0>(sms, d_table, d_ids, d_out, row_bytes); }));
    us.push_back(gather([&] { LaunchUnits<T, kN, 1>(sms, d_table, d_ids, d_out, row_bytes); }));
    us.push_back(gather([&] { LaunchUnits<T, kN, 2>(sms, d_table, d_ids, d_out, row_bytes); }));
    us.push_back(gather([&] { LaunchUnits<T, kN, 3>(sms, d_table, d_ids, d_out, row_bytes); }));
    us.push_back(gather([&] {
      LaunchWarpRows<kPerLane, 1>(ResidentBlocks<kPerLane, 1>(sms), d_table, d_ids, d_out);
    }));
    us.push_back(gather([&] {
      LaunchWarpRows<kPerLane, 2>(ResidentBlocks<kPerLane, 2>(sms), d_table, d_ids, d_out);
    }));
    us.push_back(gather([&] {
      LaunchWarpRows<kPerLane, 4>(ResidentBlocks<kPerLane, 4>(sms), d_table, d_ids, d_out);
    }));
    us.push_back(gather([&] { LaunchWarpRows<kPerLane, 1>(kIds / 8, d_table, d_ids, d_out); }));
    us.push_back(gather([&] { LaunchWarpRows<kPerLane, 2>(kIds / 16, d_table, d_ids, d_out); }));
    const double best = *std::min_element(us.begin() + 2, us.end());
    std::printf("| %lld |", static_cast<long long>(vocab));
    for (double u : us) std::printf(" %.1f |", u);
    std::printf(" %.3f | %s |\n", best / us[3], exact ? "yes" : "NO");
    CHECK(cudaFree(d_table));
  }
  CHECK(cudaFree(d_ids));
  CHECK(cudaFree(d_out));
  CHECK(cudaFree(d_copy_src));
}

}  // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::atoi(argv[1]) : 50;
  cudaDeviceProp prop{};
  CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("%s, %d SMs, L2 %d MB; median of %d calls, L2 flushed before each\n", prop.name,
              prop.multiProcessorCount, prop.l2CacheSize >> 20, reps);
  FlushTimer timer(size_t{256} << 20);
  RunCase<6>(Case{"float32", 768 * 4}, prop.multiProcessorCount, timer, reps);
  RunCase<3>(Case{"float16", 768 * 2}, prop.multiProcessorCount, timer, reps);
  return 0;
}
