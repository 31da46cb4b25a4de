// Tests the bag family of LaunchLookup (kernels/lookup.h: bags, and gathers of quantized rows) bit
// for bit, element by element, against kernels:: CpuPooledGather and CpuGather, on random tables
// that hold no zeros, NaNs or infinities (their NaN payloads would differ between host and device
// without either being wrong). Every test that needs a GPU skips, saying why, where CUDA finds no
// device.
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "kernels/cpu_gather.h"
#include "kernels/cuda_status.h"
#include "kernels/cuda_stream.h"
#include "kernels/data_type.h"
#include "kernels/device_buffer.h"
#include "kernels/lookup.h"
#include "kernels/lookup_problem.h"
#include "tests/kernels/gpu_test_util.h"
#include "tests/kernels/random_table.h"

namespace emb::kernels::bags_gpu_test {
namespace {

using ::emb::testing::RandomTable;

constexpr size_t kGuardBytes = 64;  // poisoned bytes after the answer, which must stay unchanged

// One launch's host data. Empty `offsets`: bags of one id each (offsets == nullptr, a gather).
struct Problem {
  const std::vector<std::byte>* table = nullptr;
  DataType table_type = DataType::kFloat32;
  int64_t rows = 0;
  int64_t dim = 0;
  std::vector<int64_t> ids;
  std::vector<int64_t> offsets;
  std::vector<float> weights;  // empty or one per id
  std::vector<float> scales;   // empty or one per bag
  DataType out_type = DataType::kFloat32;

  int64_t num_bags() const {
    return offsets.empty() ? static_cast<int64_t>(ids.size())
                           : static_cast<int64_t>(offsets.size()) - 1;
  }
  size_t out_bytes() const { return static_cast<size_t>(num_bags()) * RowBytes(out_type, dim); }
};

// How the GPU answer is made.
enum class Launch {
  kBags,    // LaunchLookup of the problem's bags
  kGather,  // LaunchLookup of its ids, one an answer row (GatherRows)
};

const char* LaunchName(Launch how) {
  switch (how) {
    case Launch::kBags:
      return "LaunchLookup of bags";
    case Launch::kGather:
      return "GatherRows";
  }
  return "?";
}

// CpuPooledGather's answer (offsets 0, 1, ..., n for a gather).
std::vector<std::byte> PooledOnCpu(const Problem& p) {
  std::vector<int64_t> offsets = p.offsets;
  if (offsets.empty()) {
    for (int64_t i = 0; i <= static_cast<int64_t>(p.ids.size()); ++i) {
      offsets.push_back(i);
    }
  }
  Bags bags;
  bags.ids = p.ids;
  bags.offsets = offsets;
  bags.weights = p.weights;
  bags.scales = p.scales;
  std::vector<std::byte> out(p.out_bytes());
  CpuPooledGather(p.table->data(), p.table_type, p.dim, bags, p.out_type, out.data());
  return out;
}

// CpuGather's answer (a gather: no offsets, weights or scales).
std::vector<std::byte> GatheredOnCpu(const Problem& p) {
  std::vector<std::byte> out(p.out_bytes());
  CpuGather(p.table->data(), p.table_type, p.dim, p.ids, p.out_type, out.data());
  return out;
}

// Expects `got` to equal `want` element by element, naming the first differing ones (bag,
// element, both bit patterns, the bag's length).
void ExpectSameElements(const std::byte* got, const std::vector<std::byte>& want, const Problem& p,
                        const std::string& what) {
  const size_t es = ElementSize(p.out_type);
  const size_t n = want.size() / es;
  int shown = 0;
  size_t differing = 0;
  for (size_t e = 0; e < n; ++e) {
    if (std::memcmp(got + e * es, want.data() + e * es, es) == 0) {
      continue;
    }
    ++differing;
    if (shown < 10) {
      uint32_t g = 0;
      uint32_t w = 0;
      std::memcpy(&g, got + e * es, es);
      std::memcpy(&w, want.data() + e * es, es);
      const auto bag = static_cast<int64_t>(e / static_cast<size_t>(p.dim));
      const auto col = static_cast<int64_t>(e % static_cast<size_t>(p.dim));
      const int64_t length = p.offsets.empty() ? 1 : p.offsets[bag + 1] - p.offsets[bag];
      ADD_FAILURE() << what << ": bag " << bag << " (" << length << " ids) element " << col
                    << ": GPU 0x" << std::hex << g << ", CPU 0x" << w << std::dec;
      ++shown;
    }
  }
  if (differing > 0) {
    FAIL() << what << ", " << DataTypeName(p.table_type) << " -> " << DataTypeName(p.out_type)
           << " dim " << p.dim << ": " << differing << " of " << n << " elements differ";
  }
}

// Runs `p` on the GPU the way `how` says, with the table and answer placed `table_offset` /
// `out_offset` bytes past an aligned allocation, twice with different poisons (so that an element
// left unwritten shows); expects the bytes around the answer to stay poisoned, and appends each
// run's answer to `answers`.
void RunOnGpu(const Problem& p, Launch how, size_t table_offset, size_t out_offset,
              std::vector<std::vector<std::byte>>* answers) {
  ASSERT_OK(CudaStatus(cudaSetDevice(0), "cudaSetDevice"));
  absl::StatusOr<CudaStream> stream = CudaStream::Create();
  ASSERT_TRUE(stream.ok()) << stream.status();
  const size_t out_bytes = p.out_bytes();
  // One element more each, so that empty inputs still have a (valid, unread) address.
  auto d_table = DeviceBuffer<std::byte>::Allocate(p.table->size() + table_offset + 1);
  auto d_ids = DeviceBuffer<int64_t>::Allocate(p.ids.size() + 1);
  auto d_offsets = DeviceBuffer<int64_t>::Allocate(p.offsets.size() + 1);
  auto d_weights = DeviceBuffer<float>::Allocate(p.weights.size() + 1);
  auto d_scales = DeviceBuffer<float>::Allocate(p.scales.size() + 1);
  auto d_out = DeviceBuffer<std::byte>::Allocate(out_offset + out_bytes + kGuardBytes);
  ASSERT_TRUE(d_table.ok()) << d_table.status();
  ASSERT_TRUE(d_ids.ok()) << d_ids.status();
  ASSERT_TRUE(d_offsets.ok()) << d_offsets.status();
  ASSERT_TRUE(d_weights.ok()) << d_weights.status();
  ASSERT_TRUE(d_scales.ok()) << d_scales.status();
  ASSERT_TRUE(d_out.ok()) << d_out.status();
  const auto upload = [](void* dst, const void* src, size_t bytes) {
    return bytes == 0 ? absl::OkStatus()
                      : CudaStatus(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), "upload");
  };
  ASSERT_OK(upload(d_table->data() + table_offset, p.table->data(), p.table->size()));
  ASSERT_OK(upload(d_ids->data(), p.ids.data(), p.ids.size() * sizeof(int64_t)));
  ASSERT_OK(upload(d_offsets->data(), p.offsets.data(), p.offsets.size() * sizeof(int64_t)));
  ASSERT_OK(upload(d_weights->data(), p.weights.data(), p.weights.size() * sizeof(float)));
  ASSERT_OK(upload(d_scales->data(), p.scales.data(), p.scales.size() * sizeof(float)));

  const void* table = d_table->data() + table_offset;
  void* out = d_out->data() + out_offset;
  absl::StatusOr<GatherTuning> tuning = GetGatherTuning(0);
  ASSERT_TRUE(tuning.ok()) << tuning.status();
  for (const int poison : {0xa5, 0x5a}) {
    ASSERT_OK(CudaStatus(cudaMemset(d_out->data(), poison, d_out->size()), "poison"));
    switch (how) {
      case Launch::kBags: {
        LookupProblem bags;
        bags.table = table;
        bags.table_type = p.table_type;
        bags.rows = p.rows;
        bags.dim = p.dim;
        bags.ids = d_ids->data();
        bags.offsets = p.offsets.empty() ? nullptr : d_offsets->data();
        bags.num_bags = p.num_bags();
        bags.num_ids = p.offsets.empty() ? 0 : p.offsets.back() - p.offsets.front();
        bags.weights = p.weights.empty() ? nullptr : d_weights->data();
        bags.scales = p.scales.empty() ? nullptr : d_scales->data();
        bags.out = out;
        bags.out_type = p.out_type;
        ASSERT_OK(LaunchLookup(*tuning, bags, stream->get()));
        break;
      }
      case Launch::kGather:
        ASSERT_OK(testing::GatherRows(*tuning, table, p.table_type, p.rows, p.dim, d_ids->data(),
                                      p.num_bags(), out, p.out_type, stream->get()));
        break;
    }
    std::vector<std::byte> got(d_out->size());
    ASSERT_OK(CudaStatus(cudaMemcpyAsync(got.data(), d_out->data(), got.size(),
                                         cudaMemcpyDeviceToHost, stream->get()),
                         "download"));
    ASSERT_OK(CudaStatus(cudaStreamSynchronize(stream->get()), "sync"));
    for (size_t i = 0; i < out_offset; ++i) {
      ASSERT_EQ(static_cast<int>(got[i]), poison) << "byte " << i << " before the answer";
    }
    for (size_t i = 0; i < kGuardBytes; ++i) {
      ASSERT_EQ(static_cast<int>(got[out_offset + out_bytes + i]), poison)
          << "guard byte " << i << " after the answer";
    }
    answers->emplace_back(got.begin() + static_cast<std::ptrdiff_t>(out_offset),
                          got.begin() + static_cast<std::ptrdiff_t>(out_offset + out_bytes));
  }
}

// Runs `p` as `how` says and expects CpuPooledGather's answer (bags) or CpuGather's (the
// gathers) bit for bit, element by element, under both poisons.
void ExpectGpuMatchesCpu(const Problem& p, Launch how, size_t table_offset = 0,
                         size_t out_offset = 0) {
  const std::string what =
      absl::StrCat(LaunchName(how), p.offsets.empty() ? " (no offsets)" : "",
                   p.weights.empty() ? "" : ", weighted", p.scales.empty() ? "" : ", scaled",
                   " against ", how == Launch::kBags ? "CpuPooledGather" : "CpuGather");
  SCOPED_TRACE(what);
  const std::vector<std::byte> want = how == Launch::kBags ? PooledOnCpu(p) : GatheredOnCpu(p);
  std::vector<std::vector<std::byte>> answers;
  RunOnGpu(p, how, table_offset, out_offset, &answers);
  if (::testing::Test::HasFatalFailure()) {
    return;
  }
  ASSERT_EQ(answers.size(), 2u);
  for (size_t run = 0; run < answers.size(); ++run) {
    ASSERT_EQ(answers[run].size(), want.size());
    ExpectSameElements(answers[run].data(), want, p,
                       absl::StrCat(what, run == 0 ? " (poison 0xa5)" : " (poison 0x5a)"));
  }
}

// Bag lengths: empty (at either end and inside), one, odd, even, long.
const std::vector<int64_t> kLengths = {0, 1, 3, 7, 300, 2, 1, 0, 5, 64, 33, 1, 127, 4, 9, 0};
// Short bags (a mean under kShortBagIds, 16: the short bags' own kernels): lengths around and
// past the 8 rows those load a step.
const std::vector<int64_t> kShortLengths = {0, 1, 3, 7, 8, 9, 2, 15, 1, 0, 5, 16, 4, 11, 17, 0};

// Bags of `lengths` over `rows` rows: ids 0 and rows - 1 first, then random ids with runs of
// duplicates; a random nonzero weight per id and a mean's scale per bag (1 / length, 0 empty).
struct RandomBags {
  std::vector<int64_t> ids;
  std::vector<int64_t> offsets;
  std::vector<float> weights;
  std::vector<float> means;
};

RandomBags MakeBags(const std::vector<int64_t>& lengths, int64_t rows, uint32_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> w(-2.0f, 2.0f);
  RandomBags b;
  b.offsets.push_back(0);
  for (const int64_t len : lengths) {
    for (int64_t k = 0; k < len; ++k) {
      int64_t id = static_cast<int64_t>(rng() % static_cast<uint64_t>(rows));
      if (b.ids.empty()) {
        id = 0;
      } else if (b.ids.size() == 1) {
        id = rows - 1;
      } else if (rng() % 8 == 0) {
        id = b.ids.back();
      }
      b.ids.push_back(id);
      const float x = w(rng);
      b.weights.push_back(x == 0.0f ? 0.75f : x);
    }
    b.offsets.push_back(static_cast<int64_t>(b.ids.size()));
    b.means.push_back(len == 0 ? 0.0f : 1.0f / static_cast<float>(len));
  }
  return b;
}

class BagsGpuTypesTest : public ::testing::TestWithParam<std::tuple<DataType, DataType, int64_t>> {
 protected:
  void SetUp() override { EMB_SKIP_WITHOUT_GPU(); }
};

// Sum, weighted sum and mean with offsets, of short bags and of long ones; the gather mode (no
// offsets), plain and with weights and scales; and for quantized tables the gather against
// CpuGather.
TEST_P(BagsGpuTypesTest, MatchesTheCpuBitForBit) {
  const auto [table_type, out_type, dim] = GetParam();
  const int64_t rows = 257;
  const auto seed = static_cast<uint32_t>(dim * 16 + int64_t{static_cast<int>(table_type)} * 4 +
                                          static_cast<int>(out_type));
  const std::vector<std::byte> table = RandomTable(table_type, rows, dim, seed);
  const RandomBags bags = MakeBags(kLengths, rows, seed);
  const RandomBags short_bags = MakeBags(kShortLengths, rows, seed + 1);

  Problem p;
  p.table = &table;
  p.table_type = table_type;
  p.rows = rows;
  p.dim = dim;
  p.out_type = out_type;
  for (const RandomBags* b : {&short_bags, &bags}) {
    SCOPED_TRACE(b == &bags ? "long bags" : "short bags");
    p.ids = b->ids;
    p.offsets = b->offsets;
    p.weights.clear();
    p.scales.clear();
    ExpectGpuMatchesCpu(p, Launch::kBags);  // sum
    p.weights = b->weights;
    ExpectGpuMatchesCpu(p, Launch::kBags);  // weighted sum
    p.weights.clear();
    p.scales = b->means;
    ExpectGpuMatchesCpu(p, Launch::kBags);  // mean
  }

  // Gathers: the first 200 ids, no offsets.
  p.ids.resize(200);
  p.offsets.clear();
  p.scales.clear();
  ExpectGpuMatchesCpu(p, Launch::kBags);
  if (IsQuantized(table_type)) {
    ExpectGpuMatchesCpu(p, Launch::kGather);
  }
  p.weights.assign(bags.weights.begin(), bags.weights.begin() + 200);
  p.scales.assign(bags.weights.rbegin(), bags.weights.rbegin() + 200);
  ExpectGpuMatchesCpu(p, Launch::kBags);
}

INSTANTIATE_TEST_SUITE_P(AllTypes, BagsGpuTypesTest,
                         ::testing::Combine(::testing::ValuesIn(kAllTableTypes),
                                            ::testing::ValuesIn(kAllDataTypes),
                                            ::testing::Values<int64_t>(1, 3, 7, 8, 16, 24, 64, 127,
                                                                       128, 256, 300, 1000, 4096)),
                         [](const ::testing::TestParamInfo<BagsGpuTypesTest::ParamType>& info) {
                           return std::string(DataTypeName(std::get<0>(info.param))) + "_to_" +
                                  DataTypeName(std::get<1>(info.param)) + "_dim" +
                                  std::to_string(std::get<2>(info.param));
                         });

// The table or the answer off the alignment the widest loads and stores need: narrower ones
// take over (the kernel chooses its load width from the table's address too).
class BagsGpuMisalignedTest : public ::testing::TestWithParam<DataType> {
 protected:
  void SetUp() override { EMB_SKIP_WITHOUT_GPU(); }
};

TEST_P(BagsGpuMisalignedTest, MatchesTheCpu) {
  const DataType table_type = GetParam();
  const int64_t rows = 64;
  const RandomBags bags = MakeBags({3, 0, 1, 8, 17}, rows, 3);
  for (const int64_t dim : {128, 24, 7}) {
    const std::vector<std::byte> table = RandomTable(table_type, rows, dim, 4);
    Problem p;
    p.table = &table;
    p.table_type = table_type;
    p.rows = rows;
    p.dim = dim;
    p.ids = bags.ids;
    p.offsets = bags.offsets;
    p.weights = bags.weights;
    const size_t element = IsQuantized(table_type) ? 1 : ElementSize(table_type);
    for (const DataType out_type : kAllDataTypes) {
      p.out_type = out_type;
      for (const auto& [table_offset, out_offset] :
           {std::pair<size_t, size_t>{element, 0}, std::pair<size_t, size_t>{4, 0},
            std::pair<size_t, size_t>{8, ElementSize(out_type)},
            std::pair<size_t, size_t>{0, 2 * ElementSize(out_type)}}) {
        if (table_offset % element != 0) {
          continue;
        }
        SCOPED_TRACE(absl::StrCat("dim ", dim, ", table offset ", table_offset, ", answer offset ",
                                  out_offset));
        ExpectGpuMatchesCpu(p, Launch::kBags, table_offset, out_offset);
        if (IsQuantized(table_type)) {
          Problem gather = p;
          gather.offsets.clear();
          gather.weights.clear();
          ExpectGpuMatchesCpu(gather, Launch::kGather, table_offset, out_offset);
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllTableTypes, BagsGpuMisalignedTest, ::testing::ValuesIn(kAllTableTypes),
                         [](const ::testing::TestParamInfo<DataType>& info) {
                           return std::string(DataTypeName(info.param));
                         });

class BagsGpuTest : public ::testing::Test {
 protected:
  void SetUp() override { EMB_SKIP_WITHOUT_GPU(); }
};

TEST_F(BagsGpuTest, EmptyBagsGiveZeros) {
  const std::vector<std::byte> table = RandomTable(DataType::kInt4Rowwise, 10, 33, 5);
  Problem p;
  p.table = &table;
  p.table_type = DataType::kInt4Rowwise;
  p.rows = 10;
  p.dim = 33;
  p.offsets = std::vector<int64_t>(6, 0);  // five empty bags, no ids
  p.scales = std::vector<float>(5, 0.0f);
  for (const DataType out_type : kAllDataTypes) {
    p.out_type = out_type;
    ExpectGpuMatchesCpu(p, Launch::kBags);
    const std::vector<std::byte> want = PooledOnCpu(p);
    for (const std::byte b : want) {
      ASSERT_EQ(static_cast<int>(b), 0);
    }
  }
}

// The rule (no GPU needed): the gather family serves only one id a row, unweighted and unscaled,
// from device rows of a value type; the bag family everything else.
TEST(LookupRuleTest, GatherFamilyOnlyForPlainGathersOfDeviceRows) {
  const int64_t offsets[2] = {0, 1};
  const float one = 1.0F;
  const int32_t slots[1] = {0};
  for (const DataType t : {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16}) {
    LookupProblem p;
    p.table_type = t;
    EXPECT_EQ(LookupFamilyOf(p), LookupFamily::kGather) << DataTypeName(t);
  }
  const auto family = [&](auto change) {
    LookupProblem p;
    change(p);
    return LookupFamilyOf(p);
  };
  EXPECT_EQ(family([&](LookupProblem& p) { p.offsets = offsets; }), LookupFamily::kBags);
  EXPECT_EQ(family([&](LookupProblem& p) { p.weights = &one; }), LookupFamily::kBags);
  EXPECT_EQ(family([&](LookupProblem& p) { p.scales = &one; }), LookupFamily::kBags);
  EXPECT_EQ(family([&](LookupProblem& p) { p.cached.slots = slots; }), LookupFamily::kBags);
  EXPECT_EQ(family([](LookupProblem& p) { p.table_type = DataType::kInt8Rowwise; }),
            LookupFamily::kBags);
  EXPECT_EQ(family([](LookupProblem& p) { p.table_type = DataType::kInt4Rowwise; }),
            LookupFamily::kBags);
}

TEST_F(BagsGpuTest, NoBagsIsANoOp) {
  absl::StatusOr<GatherTuning> tuning = GetGatherTuning(0);
  ASSERT_TRUE(tuning.ok()) << tuning.status();
  LookupProblem bags;  // every pointer null: with no bags none is looked at
  bags.dim = 8;
  EXPECT_TRUE(LaunchLookup(*tuning, bags, nullptr).ok());
  bags.table_type = DataType::kInt8Rowwise;
  bags.out_type = DataType::kFloat16;
  EXPECT_TRUE(LaunchLookup(*tuning, bags, nullptr).ok());
}

TEST_F(BagsGpuTest, RejectsBadArguments) {
  absl::StatusOr<DeviceBuffer<std::byte>> buf = DeviceBuffer<std::byte>::Allocate(4096);
  ASSERT_TRUE(buf.ok()) << buf.status();
  absl::StatusOr<DeviceBuffer<int64_t>> ids = DeviceBuffer<int64_t>::Allocate(4);
  ASSERT_TRUE(ids.ok()) << ids.status();
  ASSERT_OK(CudaStatus(cudaMemset(ids->data(), 0, 4 * sizeof(int64_t)), "zero ids"));
  LookupProblem good;
  good.table = buf->data();
  good.table_type = DataType::kInt8Rowwise;
  good.rows = 4;
  good.dim = 8;
  good.ids = ids->data();
  good.num_bags = 2;
  good.out = buf->data() + 2048;
  good.out_type = DataType::kFloat32;
  absl::StatusOr<GatherTuning> tuning = GetGatherTuning(0);
  ASSERT_TRUE(tuning.ok()) << tuning.status();
  ASSERT_OK(LaunchLookup(*tuning, good, nullptr));
  ASSERT_OK(CudaStatus(cudaDeviceSynchronize(), "sync"));
  const auto code = [&](auto change) {
    LookupProblem bags = good;
    change(bags);
    return LaunchLookup(*tuning, bags, nullptr).code();
  };
  constexpr auto kInvalid = absl::StatusCode::kInvalidArgument;
  EXPECT_EQ(code([](LookupProblem& b) { b.table_type = static_cast<DataType>(0); }), kInvalid);
  EXPECT_EQ(code([](LookupProblem& b) { b.table_type = static_cast<DataType>(6); }), kInvalid);
  EXPECT_EQ(code([](LookupProblem& b) { b.out_type = DataType::kInt8Rowwise; }), kInvalid);
  EXPECT_EQ(code([](LookupProblem& b) { b.out_type = DataType::kInt4Rowwise; }), kInvalid);
  EXPECT_EQ(code([](LookupProblem& b) { b.out_type = static_cast<DataType>(9); }), kInvalid);
  EXPECT_EQ(code([](LookupProblem& b) { b.dim = 0; }), kInvalid);
  EXPECT_EQ(code([](LookupProblem& b) { b.num_bags = -1; }), kInvalid);
  EXPECT_EQ(code([](LookupProblem& b) { b.rows = -1; }), kInvalid);
  EXPECT_EQ(code([](LookupProblem& b) { b.table = nullptr; }), kInvalid);
  EXPECT_EQ(code([](LookupProblem& b) { b.ids = nullptr; }), kInvalid);
  EXPECT_EQ(code([](LookupProblem& b) { b.out = nullptr; }), kInvalid);
  EXPECT_EQ(
      code([](LookupProblem& b) { b.cached.slots = reinterpret_cast<const int32_t*>(b.ids); }),
      kInvalid);  // slots without a cache
  EXPECT_EQ(code([](LookupProblem& b) { b.cached.cache = b.table; }), kInvalid);  // and the reverse
  EXPECT_EQ(LaunchLookup(GatherTuning{}, good, nullptr).code(),
            absl::StatusCode::kFailedPrecondition);
}

// One row read by every id of a long bag, and every row of the table once, odd dims.
TEST_F(BagsGpuTest, DuplicatesAndWholeTable) {
  for (const DataType t : kAllTableTypes) {
    const int64_t rows = 300;
    const int64_t dim = 301;
    const std::vector<std::byte> table = RandomTable(t, rows, dim, 6);
    Problem p;
    p.table = &table;
    p.table_type = t;
    p.rows = rows;
    p.dim = dim;
    p.ids = std::vector<int64_t>(2000, 17);
    for (int64_t r = rows - 1; r >= 0; --r) {
      p.ids.push_back(r);
    }
    p.offsets = {0, 2000, 2000 + rows};
    p.out_type = DataType::kFloat32;
    ExpectGpuMatchesCpu(p, Launch::kBags);
    p.out_type = DataType::kBFloat16;
    p.scales = {1.0f / 2000, 1.0f / static_cast<float>(rows)};
    ExpectGpuMatchesCpu(p, Launch::kBags);
  }
}

// The benchmark's shapes, smaller tables: 16384 bags of 8 over 100,000 rows of 128 float32, and a
// 65,536-id gather of an int8 and an int4 table.
TEST_F(BagsGpuTest, LargeBatch) {
  const int64_t rows = 100'000;
  const std::vector<std::byte> table = RandomTable(DataType::kFloat32, rows, 128, 7);
  const RandomBags bags = MakeBags(std::vector<int64_t>(16384, 8), rows, 8);
  Problem p;
  p.table = &table;
  p.table_type = DataType::kFloat32;
  p.rows = rows;
  p.dim = 128;
  p.ids = bags.ids;
  p.offsets = bags.offsets;
  p.out_type = DataType::kFloat32;
  ExpectGpuMatchesCpu(p, Launch::kBags);
  p.weights = bags.weights;
  p.out_type = DataType::kBFloat16;
  ExpectGpuMatchesCpu(p, Launch::kBags);
  for (const DataType t : kQuantizedTypes) {
    const std::vector<std::byte> q = RandomTable(t, rows, 128, 9);
    Problem g;
    g.table = &q;
    g.table_type = t;
    g.rows = rows;
    g.dim = 128;
    g.ids = MakeBags({65536}, rows, 10).ids;
    g.out_type = DataType::kFloat16;
    ExpectGpuMatchesCpu(g, Launch::kGather);
  }
}

}  // namespace
}  // namespace emb::kernels::bags_gpu_test
