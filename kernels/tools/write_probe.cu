// write_probe: where the gather of long rows loses write bandwidth. A standalone experiment for
// the (8, 2048, 4096) float32 leaderboard cases (16384 answer rows of 16 KB, 268 MB): it times
// writes of that answer in several orders and by several store paths (memset, 16-byte stores,
// bulk stores of whole rows in order and shuffled, 128- and 64-byte column slices of every row),
// then candidate gathers (plain, column owners, tile owners, bucket passes, a copy-engine
// pipeline), each checked byte for byte against a plain gather, in one process. Not used by the
// service; what it found, and the kernel it led to (gather/slice_owners_kernel.cuh), is in
// docs/benchmarks.md §1 and docs/runs/h200_write_probe_1.md.
//
//   nvcc -O3 -std=c++17 -arch=sm_90 -I. -o write_probe kernels/tools/write_probe.cu
//   ./write_probe            # one table: kernel, vocab, us, answer GB/s, exact
//   ./write_probe gathers    # the gathers only
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

#include "kernels/gather/copy_engine.cuh"
#include "kernels/tools/probe_harness.cuh"

namespace {

constexpr int64_t kRows = 8 * 2048;
constexpr uint32_t kRowBytes = 4096 * 4;
constexpr int kIdSets = 4;

#if defined(EMB_GATHER_BULK_COPIES)
using emb::kernels::gather::BulkLoad;
using emb::kernels::gather::BulkStore;
using emb::kernels::gather::EvictFirstPolicy;
using emb::kernels::gather::EvictLastPolicy;
using emb::kernels::gather::ExpectBytes;
using emb::kernels::gather::InitBarrier;
using emb::kernels::gather::WaitBarrier;
using emb::kernels::gather::WaitStoresDone;
#endif

// --- writes only ---------------------------------------------------------------------------

// Grid-stride 16-byte stores, front to back.
__global__ void FillV4(uint4* out, uint64_t units, bool cs) {
  const uint4 v = make_uint4(threadIdx.x, blockIdx.x, 1, 2);
  for (uint64_t u = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; u < units;
       u += uint64_t{gridDim.x} * blockDim.x) {
    if (cs) {
      __stcs(out + u, v);
    } else {
      out[u] = v;
    }
  }
}

// Each block bulk-stores one 16 KB shared buffer to answer rows order[blockIdx.x + k * grid]
// (order null: the row itself).
__global__ void BulkStoreRows(uint8_t* out, const int32_t* order, int64_t rows, bool hint) {
#if defined(EMB_GATHER_BULK_COPIES)
  extern __shared__ __align__(128) uint8_t s[];
  for (uint32_t i = threadIdx.x; i < kRowBytes / 16; i += blockDim.x) {
    reinterpret_cast<uint4*>(s)[i] = make_uint4(i, blockIdx.x, 3, 4);
  }
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  __syncthreads();
  if (threadIdx.x != 0) return;
  const uint64_t pol = EvictFirstPolicy();
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t row = order ? order[r] : r;
    BulkStore(out + row * kRowBytes, s, kRowBytes, hint, pol);
  }
  WaitStoresDone();
#else
  __trap();
#endif
}

// Block (c, h) writes bytes [c * S, c * S + S) of rows h, h + gridDim.y, ... (16-byte stores).
template <int S>
__global__ void ColSliceWrite(uint8_t* out, int64_t rows, bool cs) {
  constexpr int kPer = S / 16;  // threads per row piece
  const int lane = threadIdx.x % kPer;
  const uint4 v = make_uint4(threadIdx.x, blockIdx.x, 5, 6);
  for (int64_t r = blockIdx.y * (blockDim.x / kPer) + threadIdx.x / kPer; r < rows;
       r += int64_t{gridDim.y} * (blockDim.x / kPer)) {
    uint4* p = reinterpret_cast<uint4*>(out + r * kRowBytes + blockIdx.x * S) + lane;
    if (cs) {
      __stcs(p, v);
    } else {
      *p = v;
    }
  }
}

// --- gathers -------------------------------------------------------------------------------

// Reference: one 16-byte unit per thread, grid-stride, ld.global.nc.
__global__ void GatherPlain(const uint4* table, const int64_t* ids, uint4* out, uint64_t units,
                            bool cs) {
  constexpr uint32_t kUnits = kRowBytes / 16;
  for (uint64_t u = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; u < units;
       u += uint64_t{gridDim.x} * blockDim.x) {
    const uint64_t row = u / kUnits;
    const uint4 v = __ldg(table + ids[row] * kUnits + (u % kUnits));
    if (cs) {
      __stcs(out + u, v);
    } else {
      out[u] = v;
    }
  }
}

// Column owners: block (c, h) holds bytes [c * S, c * S + S) of every table row in shared
// memory (vocab * S bytes), then writes that slice of answer rows h, h + gridDim.y, ...
template <int S>
__global__ void GatherColOwners(const uint8_t* table, int64_t vocab, const int64_t* ids,
                                uint8_t* out, int64_t rows, bool cs) {
  extern __shared__ __align__(128) uint8_t s[];
  constexpr int kPer = S / 16;
  for (int64_t i = threadIdx.x; i < vocab * kPer; i += blockDim.x) {
    const int64_t row = i / kPer;
    const int piece = static_cast<int>(i % kPer);
    reinterpret_cast<uint4*>(s)[i] =
        __ldg(reinterpret_cast<const uint4*>(table + row * kRowBytes + blockIdx.x * S) + piece);
  }
  __syncthreads();
  const int lane = threadIdx.x % kPer;
  const int64_t step = int64_t{gridDim.y} * (blockDim.x / kPer);
  int64_t r = blockIdx.y * (blockDim.x / kPer) + threadIdx.x / kPer;
  // Two rows in flight per thread.
  for (; r + step < rows; r += 2 * step) {
    const int64_t a = __ldg(ids + r);
    const int64_t b = __ldg(ids + r + step);
    const uint4 va = reinterpret_cast<const uint4*>(s)[a * kPer + lane];
    const uint4 vb = reinterpret_cast<const uint4*>(s)[b * kPer + lane];
    uint4* pa = reinterpret_cast<uint4*>(out + r * kRowBytes + blockIdx.x * S) + lane;
    uint4* pb = reinterpret_cast<uint4*>(out + (r + step) * kRowBytes + blockIdx.x * S) + lane;
    if (cs) {
      __stcs(pa, va);
      __stcs(pb, vb);
    } else {
      *pa = va;
      *pb = vb;
    }
  }
  if (r < rows) {
    const int64_t a = __ldg(ids + r);
    uint4* pa = reinterpret_cast<uint4*>(out + r * kRowBytes + blockIdx.x * S) + lane;
    const uint4 va = reinterpret_cast<const uint4*>(s)[a * kPer + lane];
    if (cs) {
      __stcs(pa, va);
    } else {
      *pa = va;
    }
  }
}

// Tile owners: block (c, g) holds bytes [c * S, c * S + S) of table rows [g * group_rows, ...)
// in shared memory, then scans every answer row and writes that slice of the rows whose id falls
// in its group. Four answer rows in flight per thread.
template <int S>
__global__ void __launch_bounds__(1024)
    GatherTileOwners(const uint8_t* table, int64_t vocab, const int64_t* ids, uint8_t* out,
                     int64_t rows, int64_t group_rows) {
  extern __shared__ __align__(128) uint8_t s[];
  constexpr int kPer = S / 16;
  const int64_t lo = blockIdx.y * group_rows;
  const int64_t n = min(group_rows, vocab - lo);
  const int64_t units = n * kPer;
  const uint8_t* base = table + lo * kRowBytes + blockIdx.x * S;
  for (int64_t i0 = threadIdx.x; i0 < units; i0 += 8 * blockDim.x) {
    uint4 v[8];
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      const int64_t i = i0 + k * blockDim.x;
      if (i < units) {
        v[k] = __ldg(reinterpret_cast<const uint4*>(base + (i / kPer) * kRowBytes) + i % kPer);
      }
    }
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      const int64_t i = i0 + k * blockDim.x;
      if (i < units) reinterpret_cast<uint4*>(s)[i] = v[k];
    }
  }
  __syncthreads();
  const int lane = threadIdx.x % kPer;
  const int64_t step = blockDim.x / kPer;
  uint8_t* col = out + blockIdx.x * S + lane * 16;
  for (int64_t r0 = threadIdx.x / kPer; r0 < rows; r0 += 4 * step) {
    int64_t id[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const int64_t r = r0 + k * step;
      id[k] = r < rows ? __ldg(ids + r) : -1;
    }
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const uint64_t u = static_cast<uint64_t>(id[k] - lo);
      if (id[k] >= 0 && u < static_cast<uint64_t>(n)) {
        *reinterpret_cast<uint4*>(col + (r0 + k * step) * kRowBytes) =
            reinterpret_cast<const uint4*>(s)[u * kPer + lane];
      }
    }
  }
}

// Bucket passes: block (chunk, b) copies the answer rows of its chunk whose id falls in bucket b
// (ids [b * bucket_rows, ...)), a warp per row. The grid runs the buckets roughly in order, so
// the table rows in use at a time fit in L2 and a repeated row is read from DRAM once.
__global__ void __launch_bounds__(256)
    GatherBucketPass(const uint4* table, const int64_t* ids, uint4* out, int64_t rows,
                     int64_t bucket_rows, int chunk_rows, bool cs) {
  constexpr uint32_t kUnits = kRowBytes / 16;
  const int64_t lo = blockIdx.y * bucket_rows;
  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const int64_t r_end = min(int64_t{blockIdx.x + 1} * chunk_rows, rows);
  for (int64_t r32 = int64_t{blockIdx.x} * chunk_rows + warp * 32; r32 < r_end; r32 += 32 * 8) {
    const int64_t r = r32 + lane;
    const int64_t id = r < r_end ? __ldg(ids + r) : -1;
    const bool mine = id >= lo && id < lo + bucket_rows;
    uint32_t match = __ballot_sync(0xffffffffu, mine);
    while (match != 0) {
      const int src = __ffs(match) - 1;
      match &= match - 1;
      const int64_t row = r32 + src;
      const int64_t rid = __shfl_sync(0xffffffffu, id, src);
      const uint4* from = table + rid * kUnits;
      uint4* to = out + row * kUnits;
      for (uint32_t u0 = lane; u0 < kUnits; u0 += 32 * 8) {
        uint4 v[8];
#pragma unroll
        for (int k = 0; k < 8; ++k) v[k] = __ldg(from + u0 + k * 32);
#pragma unroll
        for (int k = 0; k < 8; ++k) {
          if (cs) {
            __stcs(to + u0 + k * 32, v[k]);
          } else {
            to[u0 + k * 32] = v[k];
          }
        }
      }
    }
  }
}

// Copy-engine pipeline: one thread per block streams answer rows blockIdx.x + k * gridDim.x
// through a ring of kStages 16 KB slots: bulk load of the table row (L2 evict_last), then bulk
// store of the slot (evict_first when `hint`). Loads run kAhead rows ahead of stores.
template <int kStages, int kAhead>
__global__ void GatherCopyEngine(const uint8_t* table, const int64_t* ids, uint8_t* out,
                                 int64_t rows, bool hint) {
#if defined(EMB_GATHER_BULK_COPIES)
  extern __shared__ __align__(128) uint8_t s[];
  __shared__ uint64_t bars[kStages];
  if (threadIdx.x != 0) return;
  for (int i = 0; i < kStages; ++i) InitBarrier(&bars[i]);
  const uint64_t last = EvictLastPolicy();
  const uint64_t first = EvictFirstPolicy();
  const int64_t mine = rows > blockIdx.x ? (rows - blockIdx.x + gridDim.x - 1) / gridDim.x : 0;
  auto row_of = [&](int64_t k) { return blockIdx.x + k * gridDim.x; };
  auto load = [&](int64_t k) {
    const int slot = static_cast<int>(k % kStages);
    ExpectBytes(&bars[slot], kRowBytes);
    BulkLoad(s + slot * kRowBytes, table + __ldg(ids + row_of(k)) * kRowBytes, kRowBytes,
             &bars[slot], /*evict_last=*/true, last);
  };
  for (int64_t k = 0; k < kAhead && k < mine; ++k) load(k);
  for (int64_t k = 0; k < mine; ++k) {
    const int slot = static_cast<int>(k % kStages);
    WaitBarrier(&bars[slot], static_cast<uint32_t>((k / kStages) & 1));
    BulkStore(out + row_of(k) * kRowBytes, s + slot * kRowBytes, kRowBytes, hint, first);
    const int64_t next = k + kAhead;
    if (next < mine) {
      // The slot of `next` was last stored from by row next - kStages; the kStages - kAhead
      // stores after that one may still be reading.
      asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(kStages - kAhead) : "memory");
      load(next);
    }
  }
  WaitStoresDone();
#else
  __trap();
#endif
}

// --- harness -------------------------------------------------------------------------------

using emb::kernels::probes::FlushTimer;

void Row(const char* name, int64_t vocab, float us, const char* exact) {
  const double gbs = double(kRows) * kRowBytes / (us * 1e-6) / 1e9;
  std::printf("| %-28s | %6lld | %7.1f | %6.0f | %s |\n", name, static_cast<long long>(vocab), us,
              gbs, exact);
}

}  // namespace

int main(int argc, char** argv) {
  const bool writes = !(argc > 1 && std::strcmp(argv[1], "gathers") == 0);
  cudaDeviceProp prop{};
  CHECK(cudaGetDeviceProperties(&prop, 0));
  const int sms = prop.multiProcessorCount;
  std::printf("# %s, %d SMs, L2 %d MiB\n", prop.name, sms, prop.l2CacheSize >> 20);
  const uint64_t out_bytes = uint64_t(kRows) * kRowBytes;
  uint8_t* out;
  uint8_t* ref;
  CHECK(cudaMalloc(&out, out_bytes));
  CHECK(cudaMalloc(&ref, out_bytes));
  FlushTimer timer(size_t{512} << 20);
  std::printf("| kernel | vocab | us | GB/s | exact |\n| --- | ---: | ---: | ---: | --- |\n");

  // Device-to-device copy of the answer size (read + write), for scale.
  {
    const float us =
        timer.Median([&](int) { cudaMemcpyAsync(out, ref, out_bytes, cudaMemcpyDeviceToDevice); });
    Row("memcpy d2d (read+write)", 0, us, "-");
    const float us2 = timer.Median([&](int) { cudaMemsetAsync(out, 7, out_bytes); });
    Row("memset", 0, us2, "-");
  }
  if (writes) {
    for (int blocks_per_sm : {4, 8}) {
      for (bool cs : {false, true}) {
        const float us = timer.Median([&](int) {
          FillV4<<<sms * blocks_per_sm, 256>>>(reinterpret_cast<uint4*>(out), out_bytes / 16, cs);
        });
        std::string name = "fill v4 b" + std::to_string(blocks_per_sm) + (cs ? " cs" : "");
        Row(name.c_str(), 0, us, "-");
      }
    }
    // Bulk stores in order and in a random order.
    {
      std::vector<int32_t> perm(kRows);
      for (int i = 0; i < kRows; ++i) perm[i] = i;
      std::shuffle(perm.begin(), perm.end(), std::mt19937(1));
      int32_t* d_perm;
      CHECK(cudaMalloc(&d_perm, kRows * 4));
      CHECK(cudaMemcpy(d_perm, perm.data(), kRows * 4, cudaMemcpyHostToDevice));
      CHECK(cudaFuncSetAttribute(BulkStoreRows, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 kRowBytes));
      for (int bps : {1, 2, 4}) {
        for (int order = 0; order < 2; ++order) {
          for (bool hint : {false, true}) {
            const float us = timer.Median([&](int) {
              BulkStoreRows<<<sms * bps, 32, kRowBytes>>>(out, order ? d_perm : nullptr, kRows,
                                                          hint);
            });
            std::string name = std::string("bulk store ") + (order ? "random" : "seq") + " b" +
                               std::to_string(bps) + (hint ? " ef" : "");
            Row(name.c_str(), 0, us, "-");
          }
        }
      }
    }
    // Column slices of every row.
    {
      for (int ysplit : {1, 2, 4}) {
        for (bool cs : {false, true}) {
          const float us = timer.Median([&](int) {
            ColSliceWrite<128><<<dim3(kRowBytes / 128, ysplit), 512>>>(out, kRows, cs);
          });
          std::string name = "colslice128 y" + std::to_string(ysplit) + (cs ? " cs" : "");
          Row(name.c_str(), 0, us, "-");
        }
      }
      for (bool cs : {false, true}) {
        const float us = timer.Median(
            [&](int) { ColSliceWrite<64><<<dim3(kRowBytes / 64, 1), 512>>>(out, kRows, cs); });
        Row(cs ? "colslice64 cs" : "colslice64", 0, us, "-");
      }
    }
  }  // writes

  // Gathers.
  std::mt19937_64 rng(7);
  for (int64_t vocab : {1024, 2048, 4096, 8192, 16384, 32768, 131072}) {
    const uint64_t table_bytes = uint64_t(vocab) * kRowBytes;
    uint8_t* table;
    CHECK(cudaMalloc(&table, table_bytes));
    {
      std::vector<uint32_t> h(table_bytes / 4);
      for (auto& x : h) x = static_cast<uint32_t>(rng());
      CHECK(cudaMemcpy(table, h.data(), table_bytes, cudaMemcpyHostToDevice));
    }
    int64_t* ids[kIdSets];
    for (auto& d : ids) {
      std::vector<int64_t> h(kRows);
      std::uniform_int_distribution<int64_t> pick(0, vocab - 1);
      for (auto& x : h) x = pick(rng);
      CHECK(cudaMalloc(&d, kRows * 8));
      CHECK(cudaMemcpy(d, h.data(), kRows * 8, cudaMemcpyHostToDevice));
    }
    auto check = [&](const std::function<void(int64_t*)>& run) -> const char* {
      GatherPlain<<<sms * 8, 256>>>(reinterpret_cast<const uint4*>(table), ids[0],
                                    reinterpret_cast<uint4*>(ref), out_bytes / 16, false);
      CHECK(cudaMemset(out, 0, out_bytes));
      run(ids[0]);
      CHECK(cudaGetLastError());
      CHECK(cudaDeviceSynchronize());
      std::vector<uint8_t> a(out_bytes), b(out_bytes);
      CHECK(cudaMemcpy(a.data(), out, out_bytes, cudaMemcpyDeviceToHost));
      CHECK(cudaMemcpy(b.data(), ref, out_bytes, cudaMemcpyDeviceToHost));
      return std::memcmp(a.data(), b.data(), out_bytes) == 0 ? "yes" : "NO";
    };
    auto bench = [&](const std::string& name, const std::function<void(int64_t*)>& run) {
      const char* exact = check(run);
      const float us = timer.Median([&](int i) { run(ids[i % kIdSets]); });
      Row(name.c_str(), vocab, us, exact);
    };
    for (bool cs : {false, true}) {
      bench(cs ? "plain cs" : "plain", [&](int64_t* d_ids) {
        GatherPlain<<<sms * 8, 256>>>(reinterpret_cast<const uint4*>(table), d_ids,
                                      reinterpret_cast<uint4*>(out), out_bytes / 16, cs);
      });
    }
    // Tile owners: 128-byte slices, groups of R rows, 1024 threads.
    auto tile = [&](int64_t group_rows) {
      const size_t smem = size_t(group_rows) * 128;
      CHECK(cudaFuncSetAttribute(GatherTileOwners<128>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 static_cast<int>(smem)));
      const int groups = static_cast<int>((vocab + group_rows - 1) / group_rows);
      bench("tileowners128 R" + std::to_string(group_rows), [&](int64_t* d_ids) {
        GatherTileOwners<128><<<dim3(kRowBytes / 128, groups), 1024, smem>>>(
            table, vocab, d_ids, out, kRows, group_rows);
      });
    };
    if (vocab <= 16384) {
      for (int64_t r : {1024, 1536, 512}) {
        if (r <= vocab || r == 1024) tile(r);
      }
      if (vocab == 2048) tile(683);
    }
    // Bucket passes: buckets of B rows, chunks of C answer rows.
    auto bucket = [&](int64_t bucket_rows, int chunk_rows, bool cs) {
      const int buckets = static_cast<int>((vocab + bucket_rows - 1) / bucket_rows);
      const int chunks = static_cast<int>((kRows + chunk_rows - 1) / chunk_rows);
      bench("bucketpass B" + std::to_string(bucket_rows) + " C" + std::to_string(chunk_rows) +
                (cs ? " cs" : ""),
            [&](int64_t* d_ids) {
              GatherBucketPass<<<dim3(chunks, buckets), 256>>>(
                  reinterpret_cast<const uint4*>(table), d_ids, reinterpret_cast<uint4*>(out),
                  kRows, bucket_rows, chunk_rows, cs);
            });
    };
    if (vocab >= 8192) {
      for (int64_t b : {1024, 2048}) {
        for (int c : {256, 1024}) {
          bucket(b, c, true);
        }
      }
      bucket(vocab, 256, true);  // one bucket: a plain warp-per-row gather
      bucket(2048, 256, false);
    }
    // Copy-engine pipeline, the best of the first probe.
    {
      const int smem = 4 * kRowBytes;
      CHECK(cudaFuncSetAttribute(GatherCopyEngine<4, 2>,
                                 cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
      bench("copyengine s4a2 b2 ef", [&](int64_t* d_ids) {
        GatherCopyEngine<4, 2><<<sms * 2, 32, smem>>>(table, d_ids, out, kRows, true);
      });
    }
    CHECK(cudaFree(table));
    for (auto& d : ids) CHECK(cudaFree(d));
  }
  return 0;
}
