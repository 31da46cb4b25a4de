// Tests the CUDA gather (LaunchLookup of kernels/lookup.h, and the plans of kernels/gather_plan.h)
// bit for bit against kernels::CpuGather. Every test that needs a GPU skips, saying why, where CUDA
// finds no device.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "bench/kernels/gather_variant.h"
#include "gtest/gtest.h"
#include "kernels/cpu_gather.h"
#include "kernels/cuda_status.h"
#include "kernels/cuda_stream.h"
#include "kernels/data_type.h"
#include "kernels/device_buffer.h"
#include "kernels/gather_plan.h"
#include "kernels/gather_tuning.h"
#include "kernels/lookup.h"
#include "tests/kernels/gather_test_util.h"
#include "tests/kernels/gpu_test_util.h"

namespace emb::kernels::gather_gpu_test {
namespace {

using ::emb::testing::RandomTable;

constexpr DataType kTypes[] = {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16};
constexpr size_t kGuardBytes = 64;  // poisoned bytes after the answer, which must stay unchanged

// Enqueues a gather the way the test under way wants (GatherRows, through LaunchLookup, by
// default).
using Launcher =
    std::function<absl::Status(const GatherTuning& tuning, const void* d_table, DataType table_type,
                               int64_t num_rows, int64_t dim, const int64_t* d_ids, int64_t num_ids,
                               void* d_out, DataType out_type, cudaStream_t stream)>;

// Gathers on the GPU with the table and answer placed `table_offset` / `out_offset` bytes past an
// aligned allocation (to force narrower accesses), twice with different poisons, and expects
// every byte of both answers to equal the CPU gather's (so every element was written) and the
// guard bytes around the answer to stay poisoned.
void ExpectGpuMatchesCpu(const std::vector<std::byte>& h_table, DataType table_type,
                         int64_t num_rows, int64_t dim, const std::vector<int64_t>& h_ids,
                         DataType out_type, size_t table_offset = 0, size_t out_offset = 0,
                         const Launcher& launch = testing::GatherRows) {
  absl::StatusOr<GatherTuning> tuning = GetGatherTuning(0);
  ASSERT_TRUE(tuning.ok()) << tuning.status();
  ASSERT_OK(CudaStatus(cudaSetDevice(0), "cudaSetDevice"));
  absl::StatusOr<CudaStream> stream = CudaStream::Create();
  ASSERT_TRUE(stream.ok()) << stream.status();

  const size_t out_bytes = h_ids.size() * static_cast<size_t>(dim) * ElementSize(out_type);
  absl::StatusOr<DeviceBuffer<std::byte>> d_table =
      DeviceBuffer<std::byte>::Allocate(h_table.size() + table_offset);
  absl::StatusOr<DeviceBuffer<int64_t>> d_ids = DeviceBuffer<int64_t>::Allocate(h_ids.size());
  absl::StatusOr<DeviceBuffer<std::byte>> d_out =
      DeviceBuffer<std::byte>::Allocate(out_offset + out_bytes + kGuardBytes);
  ASSERT_TRUE(d_table.ok()) << d_table.status();
  ASSERT_TRUE(d_ids.ok()) << d_ids.status();
  ASSERT_TRUE(d_out.ok()) << d_out.status();
  ASSERT_OK(CudaStatus(cudaMemcpy(d_table->data() + table_offset, h_table.data(), h_table.size(),
                                  cudaMemcpyHostToDevice),
                       "copy table"));
  if (!h_ids.empty()) {
    ASSERT_OK(CudaStatus(cudaMemcpy(d_ids->data(), h_ids.data(), h_ids.size() * sizeof(int64_t),
                                    cudaMemcpyHostToDevice),
                         "copy ids"));
  }

  std::vector<std::byte> want(out_bytes);
  CpuGather(h_table.data(), table_type, dim, h_ids, out_type, want.data());

  for (const int poison : {0xa5, 0x5a}) {
    ASSERT_OK(CudaStatus(cudaMemset(d_out->data(), poison, d_out->size()), "poison"));
    ASSERT_OK(launch(*tuning, d_table->data() + table_offset, table_type, num_rows, dim,
                     d_ids->data(), static_cast<int64_t>(h_ids.size()), d_out->data() + out_offset,
                     out_type, stream->get()));
    std::vector<std::byte> got(out_offset + out_bytes + kGuardBytes);
    ASSERT_OK(CudaStatus(cudaMemcpyAsync(got.data(), d_out->data(), got.size(),
                                         cudaMemcpyDeviceToHost, stream->get()),
                         "copy answer"));
    ASSERT_OK(CudaStatus(cudaStreamSynchronize(stream->get()), "sync"));

    for (size_t i = 0; i < out_offset; ++i) {
      ASSERT_EQ(static_cast<int>(got[i]), poison) << "byte " << i << " before the answer";
    }
    for (size_t i = 0; i < kGuardBytes; ++i) {
      ASSERT_EQ(static_cast<int>(got[out_offset + out_bytes + i]), poison)
          << "guard byte " << i << " after the answer";
    }
    if (std::memcmp(got.data() + out_offset, want.data(), out_bytes) != 0) {
      const size_t es = ElementSize(out_type);
      int shown = 0;
      for (size_t e = 0; e < out_bytes / es && shown < 10; ++e) {
        if (std::memcmp(got.data() + out_offset + e * es, want.data() + e * es, es) != 0) {
          uint32_t g = 0;
          uint32_t w = 0;
          std::memcpy(&g, got.data() + out_offset + e * es, es);
          std::memcpy(&w, want.data() + e * es, es);
          const size_t row = e / static_cast<size_t>(dim);
          const size_t col = e % static_cast<size_t>(dim);
          uint32_t in = 0;
          const size_t ies = ElementSize(table_type);
          std::memcpy(&in, h_table.data() + (static_cast<size_t>(h_ids[row]) * dim + col) * ies,
                      ies);
          ADD_FAILURE() << "answer " << row << " (id " << h_ids[row] << ") element " << col
                        << ": GPU 0x" << std::hex << g << ", CPU 0x" << w << ", input 0x" << in
                        << " (poison 0x" << poison << ")";
          ++shown;
        }
      }
      FAIL() << DataTypeName(table_type) << " -> " << DataTypeName(out_type) << " dim " << dim
             << ": GPU answer differs from CpuGather";
    }
  }
}

// num_ids ids in [0, num_rows): both end rows, runs of duplicates, and uniform
// random ones.
// NOLINTBEGIN(bugprone-easily-swappable-parameters)
std::vector<int64_t> TestIds(int64_t num_rows, size_t num_ids, uint32_t seed) {
  // NOLINTEND(bugprone-easily-swappable-parameters)
  std::mt19937_64 rng(seed);
  std::vector<int64_t> ids;
  ids.reserve(num_ids);
  const int64_t fixed[] = {0, num_rows - 1, 1 % num_rows, 0, num_rows - 1, num_rows - 1};
  for (int64_t id : fixed) {
    if (ids.size() < num_ids) {
      ids.push_back(id);
    }
  }
  while (ids.size() < num_ids) {
    const auto id = static_cast<int64_t>(rng() % static_cast<uint64_t>(num_rows));
    const size_t repeat = rng() % 8 == 0 ? 3 : 1;  // some adjacent duplicates
    for (size_t r = 0; r < repeat && ids.size() < num_ids; ++r) {
      ids.push_back(id);
    }
  }
  return ids;
}

class GatherGpuTypesTest
    : public ::testing::TestWithParam<std::tuple<DataType, DataType, int64_t>> {
 protected:
  void SetUp() override { EMB_SKIP_WITHOUT_GPU(); }
};

TEST_P(GatherGpuTypesTest, MatchesCpuGatherBitForBit) {
  const auto [table_type, out_type, dim] = GetParam();
  const int64_t num_rows = 301;
  const size_t num_ids = dim >= 4096 ? 300 : 1500;
  const auto seed = static_cast<uint32_t>(dim * 16 + int64_t{static_cast<int>(table_type)} * 4 +
                                          static_cast<int>(out_type));
  ExpectGpuMatchesCpu(RandomTable(table_type, static_cast<size_t>(num_rows * dim), seed),
                      table_type, num_rows, dim, TestIds(num_rows, num_ids, seed), out_type);
}

INSTANTIATE_TEST_SUITE_P(
    AllPairs, GatherGpuTypesTest,
    ::testing::Combine(::testing::ValuesIn(kTypes), ::testing::ValuesIn(kTypes),
                       ::testing::Values<int64_t>(1, 3, 128, 300, 768, 4096, 4097)),
    [](const ::testing::TestParamInfo<GatherGpuTypesTest::ParamType>& info) {
      return std::string(DataTypeName(std::get<0>(info.param))) + "_to_" +
             DataTypeName(std::get<1>(info.param)) + "_dim" +
             std::to_string(std::get<2>(info.param));
    });

// Table and answer one element past an aligned address: the 16-byte path is
// off, narrower accesses (down to one element) take over.
class GatherGpuMisalignedTest : public ::testing::TestWithParam<std::tuple<DataType, DataType>> {
 protected:
  void SetUp() override { EMB_SKIP_WITHOUT_GPU(); }
};

TEST_P(GatherGpuMisalignedTest, MatchesCpuGather) {
  const auto [table_type, out_type] = GetParam();
  const int64_t num_rows = 64;
  const int64_t dim = 128;
  for (const auto& [table_offset, out_offset] :
       {std::pair<size_t, size_t>{ElementSize(table_type), 0},
        std::pair<size_t, size_t>{0, ElementSize(out_type)},
        std::pair<size_t, size_t>{2 * ElementSize(table_type), 2 * ElementSize(out_type)}}) {
    SCOPED_TRACE(absl::StrCat("table offset ", table_offset, ", answer offset ", out_offset));
    ExpectGpuMatchesCpu(RandomTable(table_type, num_rows * dim, 5), table_type, num_rows, dim,
                        TestIds(num_rows, 500, 6), out_type, table_offset, out_offset);
  }
}

INSTANTIATE_TEST_SUITE_P(AllPairs, GatherGpuMisalignedTest,
                         ::testing::Combine(::testing::ValuesIn(kTypes),
                                            ::testing::ValuesIn(kTypes)));

class GatherGpuTest : public ::testing::Test {
 protected:
  void SetUp() override { EMB_SKIP_WITHOUT_GPU(); }
};

TEST_F(GatherGpuTest, AllIdsTheSame) {
  const std::vector<int64_t> ids(2000, 17);
  ExpectGpuMatchesCpu(RandomTable(DataType::kFloat32, size_t{40} * 300, 8), DataType::kFloat32, 40,
                      300, ids, DataType::kFloat32);
}

TEST_F(GatherGpuTest, FirstAndLastRowOnly) {
  const int64_t rows = 1000;
  std::vector<int64_t> ids;
  ids.reserve(999);
  for (int i = 0; i < 999; ++i) {
    ids.push_back(i % 2 == 0 ? 0 : rows - 1);
  }
  ExpectGpuMatchesCpu(RandomTable(DataType::kBFloat16, rows * 768, 9), DataType::kBFloat16, rows,
                      768, ids, DataType::kFloat16);
}

TEST_F(GatherGpuTest, LargeBatch) {
  const int64_t rows = 100'000;
  for (DataType out_type : {DataType::kFloat32, DataType::kBFloat16}) {
    SCOPED_TRACE(DataTypeName(out_type));
    ExpectGpuMatchesCpu(RandomTable(DataType::kFloat32, rows * 128, 10), DataType::kFloat32, rows,
                        128, TestIds(rows, 65536, 11), out_type);
  }
}

TEST_F(GatherGpuTest, LargeBatchOddDim) {
  const int64_t rows = 5000;
  ExpectGpuMatchesCpu(RandomTable(DataType::kFloat16, rows * 301, 12), DataType::kFloat16, rows,
                      301, TestIds(rows, 65536, 13), DataType::kFloat16);
}

TEST_F(GatherGpuTest, EmptyBatchIsANoOp) {
  ExpectGpuMatchesCpu(RandomTable(DataType::kFloat32, size_t{10} * 4, 14), DataType::kFloat32, 10,
                      4, {}, DataType::kFloat16);
  // With no ids the pointers are not looked at.
  absl::StatusOr<GatherTuning> tuning = GetGatherTuning(0);
  ASSERT_TRUE(tuning.ok()) << tuning.status();
  EXPECT_TRUE(testing::GatherRows(*tuning, nullptr, DataType::kFloat32, 0, 8, nullptr, 0, nullptr,
                                  DataType::kFloat32, nullptr)
                  .ok());
}

TEST_F(GatherGpuTest, RejectsBadArguments) {
  absl::StatusOr<GatherTuning> tuning = GetGatherTuning(0);
  ASSERT_TRUE(tuning.ok()) << tuning.status();
  absl::StatusOr<DeviceBuffer<float>> buf = DeviceBuffer<float>::Allocate(64);
  ASSERT_TRUE(buf.ok()) << buf.status();
  absl::StatusOr<DeviceBuffer<int64_t>> ids = DeviceBuffer<int64_t>::Allocate(4);
  ASSERT_TRUE(ids.ok()) << ids.status();
  auto launch = [&](const GatherTuning& t, DataType in, int64_t dim, int64_t n, DataType out) {
    return testing::GatherRows(t, buf->data(), in, 4, dim, ids->data(), n, buf->data() + 32, out,
                               nullptr);
  };
  EXPECT_EQ(launch(*tuning, static_cast<DataType>(0), 4, 1, DataType::kFloat32).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(launch(*tuning, DataType::kFloat32, 4, 1, static_cast<DataType>(7)).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(launch(*tuning, DataType::kFloat32, 0, 1, DataType::kFloat32).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(launch(*tuning, DataType::kFloat32, 4, -1, DataType::kFloat32).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(launch(GatherTuning{}, DataType::kFloat32, 4, 1, DataType::kFloat32).code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_F(GatherGpuTest, TuningComesFromTheDevice) {
  absl::StatusOr<GatherTuning> tuning = GetGatherTuning(0);
  ASSERT_TRUE(tuning.ok()) << tuning.status();
  EXPECT_EQ(tuning->device, 0);
  EXPECT_GT(tuning->num_sms, 0);
  EXPECT_GT(tuning->max_threads_per_sm, 0);
  EXPECT_GT(tuning->blocks_per_sm, 0);
  EXPECT_LE(tuning->blocks_per_sm * tuning->threads_per_block, tuning->max_threads_per_sm);
  std::printf(
      "[ tuning   ] %d SMs, %d threads/SM, L2 %lld bytes, %d blocks of "
      "%d threads/SM\n",
      tuning->num_sms, tuning->max_threads_per_sm, static_cast<long long>(tuning->l2_cache_bytes),
      tuning->blocks_per_sm, tuning->threads_per_block);
  absl::StatusOr<int> n = DeviceCount();
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(GetGatherTuning(*n).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(GetGatherTuning(-1).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(GatherGpuTest, StreamsEventsAndBuffersAreOwned) {
  absl::StatusOr<CudaStream> s = CudaStream::Create();
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_NE(s->get(), nullptr);
  CudaStream moved = std::move(*s);
  EXPECT_NE(moved.get(), nullptr);
  absl::StatusOr<CudaEvent> e = CudaEvent::Create(/*timing=*/true);
  ASSERT_TRUE(e.ok()) << e.status();
  ASSERT_OK(CudaStatus(cudaEventRecord(e->get(), moved.get()), "record"));
  ASSERT_OK(CudaStatus(cudaEventSynchronize(e->get()), "sync"));
  absl::StatusOr<PinnedBuffer<int64_t>> pinned = PinnedBuffer<int64_t>::Allocate(16);
  ASSERT_TRUE(pinned.ok()) << pinned.status();
  EXPECT_EQ(pinned->size(), 16u);
  EXPECT_EQ(pinned->size_bytes(), 128u);
  absl::StatusOr<DeviceBuffer<float>> empty = DeviceBuffer<float>::Allocate(0);
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->data(), nullptr);
}

TEST_F(GatherGpuTest, AFailedAllocationDoesNotFailLaterGathers) {
  absl::StatusOr<DeviceBuffer<float>> huge = DeviceBuffer<float>::Allocate(size_t{1} << 60);
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.status().code(), absl::StatusCode::kInternal);
  EXPECT_FALSE(IsStickyCudaError(cudaPeekAtLastError()));  // the context lives on
  ExpectGpuMatchesCpu(RandomTable(DataType::kFloat32, size_t{10} * 4, 15), DataType::kFloat32, 10,
                      4, TestIds(10, 100, 16), DataType::kFloat32);
}

// The variant of the benchmark's (and emb_gather_ex's) bits (bench::GatherVariantFromBits).
bench::GatherVariant VariantOfBits(int bits) {
  bench::GatherVariant variant;
  EXPECT_TRUE(bench::GatherVariantFromBits(bits, &variant)) << bits;
  return variant;
}

// A plan forced to `path` at `unroll_level`, with the default flags, on the grid cap `max_blocks`.
GatherPlan ForcedPlan(GatherPath path, int unroll_level, int max_blocks) {
  GatherPlan plan;
  plan.path = path;
  plan.unroll_level = unroll_level;
  plan.max_blocks = max_blocks;
  return plan;
}

TEST(GatherVariantBits, NameEveryVariantAndNothingElse) {
  bench::GatherVariant v;
  ASSERT_TRUE(bench::GatherVariantFromBits(64 + 16 + 4 + 2, &v));
  EXPECT_FALSE(v.by_rule);
  EXPECT_EQ(v.plan.path, GatherPath::kRowOwners);
  EXPECT_EQ(v.plan.unroll_level, 2);
  EXPECT_TRUE(v.plan.interleaved);
  EXPECT_TRUE(v.plan.streaming_stores);
  EXPECT_TRUE(v.plan.table_evict_last);
  ASSERT_TRUE(bench::GatherVariantFromBits(96 + 8, &v));
  EXPECT_TRUE(v.by_rule);
  EXPECT_FALSE(v.plan.streaming_stores);
  ASSERT_TRUE(bench::GatherVariantFromBits(32 + 8 + 3, &v));
  EXPECT_FALSE(v.by_rule);
  EXPECT_EQ(v.plan.path, GatherPath::kSliceOwners);
  EXPECT_EQ(v.plan.unroll_level, 3);
  EXPECT_FALSE(v.plan.streaming_stores);
  EXPECT_FALSE(v.plan.table_evict_last);
  ASSERT_TRUE(bench::GatherVariantFromBits(128 + 4 + 1, &v));
  EXPECT_FALSE(v.by_rule);
  EXPECT_EQ(v.plan.path, GatherPath::kColumnPasses);
  EXPECT_EQ(v.plan.unroll_level, 1);
  for (int bad : {-1, 128 + 32, 128 + 64, 256, 1 << 20}) {  // passes with a path; out of range
    EXPECT_FALSE(bench::GatherVariantFromBits(bad, &v)) << bad;
  }
}

// Every kernel variant (the benchmark's sweep) and grid shape gives the same answer: the default
// cap, one resident wave, a cap of 3 blocks (so each block walks many tiles, the last one
// partial; for kRowOwners 3 id slices, for kSliceOwners 3 blocks per column slice), and no cap
// (kRowOwners: a slice per id). The owners paths also get long rows (16400 and 32768 bytes) and
// the shapes they fall back from.
class GatherGpuVariantTest : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override { EMB_SKIP_WITHOUT_GPU(); }
};

TEST_P(GatherGpuVariantTest, MatchesCpuGather) {
  const int bits = GetParam();
  const bench::GatherVariant variant = VariantOfBits(bits);
  struct Case {
    DataType in;
    DataType out;
    int64_t dim;
  };
  std::vector<Case> cases = {Case{DataType::kFloat32, DataType::kFloat32, 768},    // 16 B units
                             Case{DataType::kFloat16, DataType::kFloat16, 300},    // 8 B units
                             Case{DataType::kBFloat16, DataType::kFloat32, 128},   // 8 B -> 16 B
                             Case{DataType::kFloat32, DataType::kBFloat16, 4097},  // 1 element
                             Case{DataType::kFloat32, DataType::kFloat16, 3}};
  if (variant.by_rule || variant.plan.path != GatherPath::kUnits) {
    cases.push_back(Case{DataType::kFloat32, DataType::kFloat32, 300});     // 1200 B rows
    cases.push_back(Case{DataType::kBFloat16, DataType::kBFloat16, 1000});  // 2000 B rows
    cases.push_back(Case{DataType::kFloat32, DataType::kFloat32, 4096});    // one 16 KB piece
    cases.push_back(Case{DataType::kFloat32, DataType::kFloat32, 4100});    // two pieces, unequal
    cases.push_back(Case{DataType::kFloat16, DataType::kFloat16, 16384});   // two 16 KB pieces
  }
  for (const int max_blocks : {0, -1, 3, 1 << 30}) {
    const Launcher launch = [&](const GatherTuning& t, const void* d_table, DataType table_type,
                                int64_t num_rows, int64_t dim, const int64_t* d_ids,
                                int64_t num_ids, void* d_out, DataType out_type,
                                cudaStream_t stream) {
      const GatherProblem problem{d_table, table_type, num_rows, dim,
                                  d_ids,   num_ids,    d_out,    out_type};
      return CudaStatus(LaunchGatherPlan(t, bench::PlanOfVariant(t, variant, max_blocks, problem),
                                         problem, stream),
                        "LaunchGatherPlan");
    };
    for (const Case& c : cases) {
      SCOPED_TRACE(absl::StrCat(DataTypeName(c.in), " -> ", DataTypeName(c.out), " dim ", c.dim,
                                ", max_blocks ", max_blocks));
      const int64_t rows = 211;
      ExpectGpuMatchesCpu(RandomTable(c.in, static_cast<size_t>(rows * c.dim), 20 + bits), c.in,
                          rows, c.dim, TestIds(rows, c.dim > 1000 ? 97 : 1201, 30 + bits), c.out, 0,
                          0, launch);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Sweep, GatherGpuVariantTest,
                         ::testing::Values(
                             // kUnits
                             0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, 16, 17, 18, 20, 21, 22, 24, 25,
                             26, 28, 29, 30,
                             // kUnits, unroll level 3 (8 or 16 units in flight per thread)
                             3, 7, 15, 23, 31,
                             // kRowOwners
                             64, 65, 66, 72, 73, 74, 80, 81, 82, 88, 89, 90,
                             // kSliceOwners
                             32, 33, 34, 35, 40, 41, 48, 49, 50, 51, 56, 57, 58, 59,
                             // kUnits in column passes (raw bytes; the rest fall back)
                             128 + 4 + 16, 128 + 1 + 4 + 8, 128 + 2, 128 + 3 + 4 + 16,
                             // the rule's
                             96 + 1 + 4 + 16, 96 + 0 + 8));

// A launcher that enqueues the gather with `plan` on the tuning that `tuning_of` makes of the
// device's, after checking that the plan's path fits the gather's arguments (so that the forced
// path is the one tested).
Launcher LaunchOnPath(std::function<GatherTuning(const GatherTuning&)> tuning_of,
                      const GatherPlan& plan) {
  return [tuning_of = std::move(tuning_of), plan](
             const GatherTuning& t, const void* d_table, DataType table_type, int64_t num_rows,
             int64_t dim, const int64_t* d_ids, int64_t num_ids, void* d_out, DataType out_type,
             cudaStream_t stream) {
    const GatherTuning tuning = tuning_of(t);
    const GatherProblem problem{d_table, table_type, num_rows, dim,
                                d_ids,   num_ids,    d_out,    out_type};
    EXPECT_TRUE(GatherPathFits(tuning, plan.path, problem)) << static_cast<int>(plan.path);
    return CudaStatus(LaunchGatherPlan(tuning, plan, problem, stream), "LaunchGatherPlan");
  };
}

// A table with more rows than a slice-owners block holds in shared memory: the rest come from
// the table in global memory, in the same pass. Every rows-in-flight level, on one resident wave
// and with 3 blocks per slice; 1000 ids, so the last step is partial.
TEST_F(GatherGpuTest, SliceOwnersReadRowsPastSharedMemoryFromTheTable) {
  const int64_t rows = 5000;  // more than 227 KB of 128-byte slices (1808 rows)
  const int64_t dim = 64;     // 256-byte rows: two slices
  const std::vector<std::byte> table =
      RandomTable(DataType::kFloat32, static_cast<size_t>(rows * dim), 50);
  for (const int level : {0, 1, 2, 3}) {
    for (const int max_blocks : {-1, 3}) {
      const Launcher launch = LaunchOnPath([](const GatherTuning& t) { return t; },
                                           ForcedPlan(GatherPath::kSliceOwners, level, max_blocks));
      SCOPED_TRACE(absl::StrCat("level ", level, ", max_blocks ", max_blocks));
      ExpectGpuMatchesCpu(table, DataType::kFloat32, rows, dim, TestIds(rows, 1000, 51 + level),
                          DataType::kFloat32, 0, 0, launch);
    }
  }
}

// Column passes on a device tuning that claims a 64 KB L2, so that 100 rows of 1 KB take 4 passes
// of 256 bytes (the largest divisor of the row's 64 units whose chunk of every row fits 32 KB).
// Ids that all name one row, ids in descending order, and random ids; 3000 ids, so the last tile
// is partial. Every unroll level, on the default grid and on 3 blocks.
TEST_F(GatherGpuTest, ColumnPassesPutEveryChunkInPlace) {
  const int64_t rows = 100;
  const int64_t dim = 256;  // 1 KB rows
  const std::vector<std::byte> table =
      RandomTable(DataType::kFloat32, static_cast<size_t>(rows * dim), 70);
  std::vector<int64_t> descending(3000);
  for (size_t i = 0; i < descending.size(); ++i) {
    descending[i] = rows - 1 - static_cast<int64_t>(i % rows);
  }
  const std::vector<std::vector<int64_t>> id_sets = {std::vector<int64_t>(3000, 42), descending,
                                                     TestIds(rows, 3000, 71)};
  for (const int level : {0, 1, 2, 3}) {
    for (const int max_blocks : {0, 3}) {
      const Launcher launch = LaunchOnPath(
          [](const GatherTuning& t) {
            GatherTuning small_l2 = t;
            small_l2.l2_cache_bytes = 64 << 10;
            return small_l2;
          },
          ForcedPlan(GatherPath::kColumnPasses, level, max_blocks));
      for (size_t set = 0; set < id_sets.size(); ++set) {
        SCOPED_TRACE(absl::StrCat("level ", level, ", max_blocks ", max_blocks, ", id set ", set));
        ExpectGpuMatchesCpu(table, DataType::kFloat32, rows, dim, id_sets[set], DataType::kFloat32,
                            0, 0, launch);
      }
    }
  }
}

// The paths the rule takes, and the fallbacks, on the device. Small tables whose rows repeat go
// by column slice; this one's 16 KB rows repeat about 30 times.
TEST_F(GatherGpuTest, SmallTableManyIdsGoesByColumnSlice) {
  absl::StatusOr<GatherTuning> tuning = GetGatherTuning(0);
  ASSERT_TRUE(tuning.ok()) << tuning.status();
  const int64_t rows = 64;
  const int64_t dim = 4096;
  const std::vector<int64_t> ids = TestIds(rows, 2000, 40);
  void* aligned = reinterpret_cast<void*>(uintptr_t{1} << 20);
  const GatherProblem problem{
      aligned, DataType::kFloat32, rows, dim, nullptr, static_cast<int64_t>(ids.size()),
      aligned, DataType::kFloat32};
  EXPECT_EQ(PlanGather(*tuning, problem).path, GatherPath::kSliceOwners);
  ExpectGpuMatchesCpu(RandomTable(DataType::kFloat32, static_cast<size_t>(rows * dim), 41),
                      DataType::kFloat32, rows, dim, ids, DataType::kFloat32);
}

// LaunchGatherPlan refuses a plan with no valid unroll level or path, and a path that does not
// fit the gather (nothing is launched: the pointers below are not memory).
TEST_F(GatherGpuTest, RejectsABadPlan) {
  absl::StatusOr<GatherTuning> tuning = GetGatherTuning(0);
  ASSERT_TRUE(tuning.ok()) << tuning.status();
  const GatherProblem problem{nullptr, DataType::kFloat32, 4, 4, nullptr, 1,
                              nullptr, DataType::kFloat32};
  GatherPlan plan;
  plan.unroll_level = kGatherUnrollLevels;
  EXPECT_EQ(LaunchGatherPlan(*tuning, plan, problem, nullptr), cudaErrorInvalidValue);
  plan = GatherPlan{};
  plan.path = static_cast<GatherPath>(7);
  EXPECT_EQ(LaunchGatherPlan(*tuning, plan, problem, nullptr), cudaErrorInvalidValue);
  void* aligned = reinterpret_cast<void*>(uintptr_t{1} << 20);
  const GatherProblem conversion{
      aligned, DataType::kFloat32, 64, 4096, reinterpret_cast<const int64_t*>(aligned), 2000,
      aligned, DataType::kFloat16};
  for (const GatherPath path :
       {GatherPath::kRowOwners, GatherPath::kSliceOwners, GatherPath::kColumnPasses}) {
    SCOPED_TRACE(static_cast<int>(path));
    EXPECT_FALSE(GatherPathFits(*tuning, path, conversion));
    EXPECT_EQ(LaunchGatherPlan(*tuning, ForcedPlan(path, 1, 0), conversion, nullptr),
              cudaErrorInvalidValue);
  }
}

// The rule (PlanGather, gather_rule.cc) on an sm_90 device's tuning; needs no GPU.
GatherTuning H200Tuning() {
  GatherTuning tuning;
  tuning.num_sms = 132;
  tuning.max_threads_per_sm = 2048;
  tuning.cc_major = 9;
  tuning.smem_per_block_optin = 227 << 10;
  tuning.l2_cache_bytes = int64_t{60} << 20;
  return tuning;
}

TEST(GatherPathRule, PicksByShape) {
  GatherTuning tuning = H200Tuning();
  void* p = reinterpret_cast<void*>(uintptr_t{1} << 20);
  const void* odd = reinterpret_cast<const void*>((uintptr_t{1} << 20) + 8);
  const auto path = [&](DataType in, int64_t rows, int64_t dim, int64_t ids, DataType out,
                        const void* table = nullptr) {
    const GatherProblem problem{table != nullptr ? table : p, in, rows, dim, nullptr, ids, p, out};
    return PlanGather(tuning, problem).path;
  };
  constexpr DataType kF32 = DataType::kFloat32;
  constexpr DataType kF16 = DataType::kFloat16;
  EXPECT_EQ(path(kF32, 1024, 4096, 16384, kF32), GatherPath::kSliceOwners);
  EXPECT_EQ(path(kF32, 1808, 4096, 16384, kF32), GatherPath::kSliceOwners);    // all held
  EXPECT_EQ(path(kF32, 2066, 4096, 16384, kF32), GatherPath::kSliceOwners);    // 7/8 held
  EXPECT_EQ(path(kF32, 2067, 4096, 16384, kF32), GatherPath::kRowOwners);      // less; fits L2
  EXPECT_EQ(path(kF32, 3840, 4096, 16384, kF32), GatherPath::kRowOwners);      // 60 MB: fits L2
  EXPECT_EQ(path(kF32, 3841, 4096, 16384, kF32), GatherPath::kColumnPasses);   // past L2
  EXPECT_EQ(path(kF32, 8192, 4096, 16384, kF32), GatherPath::kColumnPasses);   // 2 KB chunks
  EXPECT_EQ(path(kF32, 32768, 4096, 16384, kF32), GatherPath::kColumnPasses);  // 512 B
  EXPECT_EQ(path(kF32, 32768, 4096, 16383, kF32), GatherPath::kUnits);         // ids < rows / 2
  EXPECT_EQ(path(kF32, 65536, 4096, 16384, kF32), GatherPath::kUnits);         // 256 B chunks
  EXPECT_EQ(path(kF32, 131072, 4096, 16384, kF32), GatherPath::kUnits);
  EXPECT_EQ(path(kF32, 8192, 4096, 16384, kF16), GatherPath::kUnits);       // a conversion
  EXPECT_EQ(path(kF32, 1024, 768, 16384, kF32), GatherPath::kUnits);        // 3 KB rows
  EXPECT_EQ(path(kF16, 1024, 4096, 16384, kF16), GatherPath::kUnits);       // 8 KB rows
  EXPECT_EQ(path(kF32, 1024, 4096, 16384, kF16), GatherPath::kUnits);       // a conversion
  EXPECT_EQ(path(kF32, 1024, 4100, 16384, kF32), GatherPath::kRowOwners);   // 16400 B rows
  EXPECT_EQ(path(kF32, 1024, 4097, 16384, kF32), GatherPath::kUnits);       // odd row bytes
  EXPECT_EQ(path(kF32, 1024, 4096, 16384, kF32, odd), GatherPath::kUnits);  // misaligned
  EXPECT_EQ(path(kF32, 1024, 65536, 16384, kF32), GatherPath::kUnits);      // 256 KB rows: too long
  tuning.cc_major = 8;  // no copy engine: row owners give way; the other paths need none
  EXPECT_EQ(path(kF32, 1024, 4096, 16384, kF32), GatherPath::kSliceOwners);
  EXPECT_EQ(path(kF32, 3000, 4096, 16384, kF32), GatherPath::kUnits);
  EXPECT_EQ(path(kF32, 8192, 4096, 16384, kF32), GatherPath::kColumnPasses);
  tuning.cc_major = 7;  // no cp.async
  EXPECT_EQ(path(kF32, 1024, 4096, 16384, kF32), GatherPath::kUnits);
}

// Each path's launch in the rule's plans: row owners at unroll level 0 (a quarter of the
// bytes-read optimum), slice owners at 2, column passes and units at 1; every path with
// evict-first stores, evict_last table loads and the default grid.
TEST(GatherPathRule, PlansEachPathsLaunch) {
  const GatherTuning tuning = H200Tuning();
  void* p = reinterpret_cast<void*>(uintptr_t{1} << 20);
  struct Want {
    int64_t rows;
    GatherPath path;
    int unroll_level;
  };
  for (const Want& want :
       {Want{1024, GatherPath::kSliceOwners, 2}, Want{3000, GatherPath::kRowOwners, 0},
        Want{8192, GatherPath::kColumnPasses, 1}, Want{131072, GatherPath::kUnits, 1}}) {
    SCOPED_TRACE(absl::StrCat(want.rows, " rows"));
    const GatherProblem problem{p, DataType::kFloat32, want.rows, 4096, nullptr, 16384,
                                p, DataType::kFloat32};
    const GatherPlan plan = PlanGather(tuning, problem);
    EXPECT_EQ(plan.path, want.path);
    EXPECT_EQ(plan.unroll_level, want.unroll_level);
    EXPECT_TRUE(plan.interleaved);
    EXPECT_TRUE(plan.streaming_stores);
    EXPECT_TRUE(plan.table_evict_last);
    EXPECT_EQ(plan.max_blocks, 0);
    EXPECT_TRUE(GatherPathFits(tuning, plan.path, problem));
  }
}

// These need no GPU.
TEST(CudaStatus, OkOnSuccessInternalOtherwise) {
  EXPECT_TRUE(CudaStatus(cudaSuccess, "x").ok());
  const absl::Status s = CudaStatus(cudaErrorMemoryAllocation, "cudaMalloc(4096 bytes)");
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(s.message().substr(0, 49), "cudaMalloc(4096 bytes): cudaErrorMemoryAllocation")
      << s.message();
}

TEST(CudaStatus, StickyErrors) {
  EXPECT_TRUE(IsStickyCudaError(cudaErrorIllegalAddress));
  EXPECT_TRUE(IsStickyCudaError(cudaErrorLaunchFailure));
  EXPECT_TRUE(IsStickyCudaError(cudaErrorMisalignedAddress));
  EXPECT_TRUE(IsStickyCudaError(cudaErrorIllegalInstruction));
  EXPECT_TRUE(IsStickyCudaError(cudaErrorHardwareStackError));
  EXPECT_TRUE(IsStickyCudaError(cudaErrorECCUncorrectable));
  EXPECT_FALSE(IsStickyCudaError(cudaSuccess));
  EXPECT_FALSE(IsStickyCudaError(cudaErrorMemoryAllocation));
  EXPECT_FALSE(IsStickyCudaError(cudaErrorInvalidValue));
  EXPECT_FALSE(IsStickyCudaError(cudaErrorNoDevice));
}

}  // namespace
}  // namespace emb::kernels::gather_gpu_test
