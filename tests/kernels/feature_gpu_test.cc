// Tests LaunchFeatureLookup (kernels/feature_lookup.h), the table-batched lookup, bit for bit,
// element by element, against CpuFeatureLookup (kernels/cpu_feature_lookup.h), on random tables
// of every table type (tests/kernels/random_table.h) and dim, features pooled (sum, mean,
// weighted) and unpooled sharing tables, empty bags, tables in two tiers; and its refusals. Every
// test that needs a GPU skips, saying why, where CUDA finds no device.
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "kernels/cpu_feature_lookup.h"
#include "kernels/cuda_status.h"
#include "kernels/cuda_stream.h"
#include "kernels/data_type.h"
#include "kernels/device_buffer.h"
#include "kernels/feature_lookup.h"
#include "kernels/feature_lookup_check.h"
#include "kernels/feature_lookup_problem.h"
#include "kernels/lookup.h"
#include "tests/kernels/feature_batch.h"
#include "tests/kernels/gpu_test_util.h"
#include "tests/kernels/random_table.h"

namespace emb::kernels::feature_gpu_test {
namespace {

using ::emb::testing::AddFeature;
using ::emb::testing::Batch;
using ::emb::testing::HostDescriptors;
using ::emb::testing::HostProblem;
using ::emb::testing::HostTable;
using ::emb::testing::Pooled;
using ::emb::testing::RandomTable;
using ::emb::testing::Unpooled;

constexpr size_t kGuardBytes = 64;  // poisoned bytes after each answer, which must stay unchanged

HostTable MakeTable(DataType type, int64_t rows, int64_t dim, uint32_t seed) {
  return HostTable{type, rows, dim, RandomTable(type, rows, dim, seed)};
}

// Both answers of a call.
struct Answers {
  std::vector<std::byte> pooled;
  std::vector<std::byte> unpooled;
};

// CpuFeatureLookup's answers.
Answers OnCpu(const Batch& b) {
  const std::vector<FeatureTable> tables = HostDescriptors(b);
  // One byte more each, so that an empty answer still has an address.
  Answers a{std::vector<std::byte>(b.pooled_bytes() + 1),
            std::vector<std::byte>(b.unpooled_bytes() + 1)};
  const absl::Status s =
      CpuFeatureLookup(HostProblem(b, tables, a.pooled.data(), a.unpooled.data()));
  EXPECT_TRUE(s.ok()) << s;
  a.pooled.pop_back();
  a.unpooled.pop_back();
  return a;
}

// Where the GPU run puts things.
struct Placement {
  bool misaligned = false;  // odd tables one element (quantized: one byte) past an aligned address
  int64_t max_dim = 0;      // the launch's hint; 0: the tables' widest dim
  std::set<int32_t> two_tiers;  // these tables' rows in mapped host memory, every third cached
};

// Whether row `r` of a table in two tiers is in its cache, and at which slot.
bool Cached(int64_t r) { return r % 3 == 0; }
int32_t SlotOf(int64_t r, int64_t rows) {
  return static_cast<int32_t>((rows + 2) / 3 - 1 - r / 3);  // reversed: slot order isn't row order
}

// A table's memory on the device for one run: its rows, or its two tiers.
struct DeviceTable {
  DeviceBuffer<std::byte> rows;
  PinnedBuffer<std::byte> host_rows;
  DeviceBuffer<std::byte> cache;
  DeviceBuffer<int32_t> slots;
  DeviceBuffer<unsigned long long> misses;
  FeatureTable descriptor;
};

absl::Status Upload(void* dst, const void* src, size_t bytes) {
  return bytes == 0 ? absl::OkStatus()
                    : CudaStatus(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), "upload");
}

// Places table `t` (index i) on the device as `where` says.
absl::Status PlaceTable(const HostTable& t, int32_t i, const Placement& where, DeviceTable* d) {
  const size_t offset =
      where.misaligned && i % 2 == 1 ? (IsQuantized(t.type) ? 1 : ElementSize(t.type)) : 0;
  d->descriptor.type = t.type;
  d->descriptor.num_rows = t.rows;
  d->descriptor.dim = t.dim;
  if (where.two_tiers.count(i) == 0) {
    auto rows = DeviceBuffer<std::byte>::Allocate(t.bytes.size() + offset + 1);
    if (!rows.ok()) {
      return rows.status();
    }
    d->rows = std::move(*rows);
    d->descriptor.rows = d->rows.data() + offset;
    return Upload(d->rows.data() + offset, t.bytes.data(), t.bytes.size());
  }
  auto host = PinnedBuffer<std::byte>::Allocate(t.bytes.size() + offset + 1, cudaHostAllocMapped);
  if (!host.ok()) {
    return host.status();
  }
  d->host_rows = std::move(*host);
  std::memcpy(d->host_rows.data() + offset, t.bytes.data(), t.bytes.size());
  void* mapped = nullptr;
  EMB_CUDA_RETURN_IF_ERROR(cudaHostGetDevicePointer(&mapped, d->host_rows.data(), 0),
                           "cudaHostGetDevicePointer");
  d->descriptor.rows = static_cast<std::byte*>(mapped) + offset;
  const size_t row_bytes = RowBytes(t.type, t.dim);
  const int64_t cached = (t.rows + 2) / 3;
  std::vector<std::byte> cache(static_cast<size_t>(cached) * row_bytes + offset);
  std::vector<int32_t> slots(static_cast<size_t>(t.rows), -1);
  for (int64_t r = 0; r < t.rows; ++r) {
    if (Cached(r)) {
      slots[static_cast<size_t>(r)] = SlotOf(r, t.rows);
      std::memcpy(cache.data() + offset + static_cast<size_t>(SlotOf(r, t.rows)) * row_bytes,
                  t.bytes.data() + static_cast<size_t>(r) * row_bytes, row_bytes);
    }
  }
  auto d_cache = DeviceBuffer<std::byte>::Allocate(cache.size());
  auto d_slots = DeviceBuffer<int32_t>::Allocate(slots.size());
  auto d_misses = DeviceBuffer<unsigned long long>::Allocate(CachedRows::kMissCounters);
  if (!d_cache.ok() || !d_slots.ok() || !d_misses.ok()) {
    return absl::InternalError("allocating a two-tier table's cache, slots or counters");
  }
  d->cache = std::move(*d_cache);
  d->slots = std::move(*d_slots);
  d->misses = std::move(*d_misses);
  d->descriptor.cached.cache = d->cache.data() + offset;
  d->descriptor.cached.slots = d->slots.data();
  d->descriptor.cached.misses = d->misses.data();
  if (absl::Status s = Upload(d->cache.data(), cache.data(), cache.size()); !s.ok()) {
    return s;
  }
  return Upload(d->slots.data(), slots.data(), slots.size() * sizeof(int32_t));
}

// The rows that the ids of `b` read from table i's host tier, as PlaceTable splits it.
uint64_t ExpectedMisses(const Batch& b, int32_t i) {
  uint64_t n = 0;
  for (size_t f = 0; f < b.features.size(); ++f) {
    if (b.features[f].table != i) {
      continue;
    }
    const size_t first = f * static_cast<size_t>(b.batch);
    for (int64_t k = b.offsets[first]; k < b.offsets[first + static_cast<size_t>(b.batch)]; ++k) {
      n += Cached(b.ids[static_cast<size_t>(k)]) ? 0 : 1;
    }
  }
  return n;
}

// Expects `got` to equal `want` element by element, naming the first differing ones.
void ExpectSameElements(const std::vector<std::byte>& got, const std::vector<std::byte>& want,
                        const Batch& b, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  const size_t es = ElementSize(b.out_type);
  size_t differing = 0;
  for (size_t e = 0; e < want.size() / es; ++e) {
    if (std::memcmp(got.data() + e * es, want.data() + e * es, es) == 0) {
      continue;
    }
    if (++differing <= 10) {
      uint32_t g = 0;
      uint32_t w = 0;
      std::memcpy(&g, got.data() + e * es, es);
      std::memcpy(&w, want.data() + e * es, es);
      ADD_FAILURE() << what << ": element " << e << ": GPU 0x" << std::hex << g << ", CPU 0x" << w;
    }
  }
  EXPECT_EQ(differing, 0u) << what << ", answer " << DataTypeName(b.out_type);
}

// Downloads `bytes` at d_out + kGuardBytes, expecting the guard bytes around it still `poison`.
absl::Status Download(const DeviceBuffer<std::byte>& d_out, size_t bytes, int poison,
                      std::vector<std::byte>* answer) {
  std::vector<std::byte> all(d_out.size());
  EMB_CUDA_RETURN_IF_ERROR(cudaMemcpy(all.data(), d_out.data(), all.size(), cudaMemcpyDeviceToHost),
                           "download");
  for (size_t i = 0; i < all.size(); ++i) {
    if ((i < kGuardBytes || i >= kGuardBytes + bytes) && static_cast<int>(all[i]) != poison) {
      return absl::DataLossError(absl::StrCat("guard byte ", i, " of ", all.size(), " written"));
    }
  }
  answer->assign(all.begin() + kGuardBytes,
                 all.begin() + static_cast<std::ptrdiff_t>(kGuardBytes + bytes));
  return absl::OkStatus();
}

// Runs `b` on the GPU placed as `where` says, under two poisons (so that an element left
// unwritten shows), and expects CpuFeatureLookup's answers bit for bit, the guard bytes around
// them untouched, and each two-tier table's miss count.
void ExpectGpuMatchesCpu(const Batch& b, const Placement& where) {
  SCOPED_TRACE(absl::StrCat(where.misaligned ? "misaligned tables, " : "", "max_dim hint ",
                            where.max_dim, ", ", where.two_tiers.size(), " tables in two tiers"));
  const Answers want = OnCpu(b);
  ASSERT_OK(CudaStatus(cudaSetDevice(0), "cudaSetDevice"));
  absl::StatusOr<CudaStream> stream = CudaStream::Create();
  ASSERT_TRUE(stream.ok()) << stream.status();
  std::vector<DeviceTable> tables(b.tables.size());
  std::vector<FeatureTable> descriptors;
  for (size_t i = 0; i < b.tables.size(); ++i) {
    ASSERT_OK(PlaceTable(b.tables[i], static_cast<int32_t>(i), where, &tables[i]));
    descriptors.push_back(tables[i].descriptor);
  }
  auto d_tables = DeviceBuffer<FeatureTable>::Allocate(descriptors.size());
  auto d_features = DeviceBuffer<FeatureSpec>::Allocate(b.features.size());
  auto d_ids = DeviceBuffer<int64_t>::Allocate(b.ids.size() + 1);
  auto d_offsets = DeviceBuffer<int64_t>::Allocate(b.offsets.size());
  auto d_weights = DeviceBuffer<float>::Allocate(b.weights.size() + 1);
  auto d_pooled = DeviceBuffer<std::byte>::Allocate(b.pooled_bytes() + 2 * kGuardBytes);
  auto d_unpooled = DeviceBuffer<std::byte>::Allocate(b.unpooled_bytes() + 2 * kGuardBytes);
  for (const absl::Status& s :
       {d_tables.status(), d_features.status(), d_ids.status(), d_offsets.status(),
        d_weights.status(), d_pooled.status(), d_unpooled.status()}) {
    ASSERT_OK(s);
  }
  ASSERT_OK(
      Upload(d_tables->data(), descriptors.data(), descriptors.size() * sizeof(FeatureTable)));
  ASSERT_OK(Upload(d_features->data(), b.features.data(), b.features.size() * sizeof(FeatureSpec)));
  ASSERT_OK(Upload(d_ids->data(), b.ids.data(), b.ids.size() * sizeof(int64_t)));
  ASSERT_OK(Upload(d_offsets->data(), b.offsets.data(), b.offsets.size() * sizeof(int64_t)));
  ASSERT_OK(Upload(d_weights->data(), b.weights.data(), b.weights.size() * sizeof(float)));

  FeatureLookupProblem p;
  p.tables = d_tables->data();
  p.num_tables = static_cast<int32_t>(descriptors.size());
  p.features = d_features->data();
  p.num_features = static_cast<int32_t>(b.features.size());
  p.batch = b.batch;
  p.ids = d_ids->data();
  p.offsets = d_offsets->data();
  p.weights = d_weights->data();
  p.pooled_out = d_pooled->data() + kGuardBytes;
  p.pooled_width = b.pooled_width;
  p.unpooled_out = d_unpooled->data() + kGuardBytes;
  p.out_type = b.out_type;
  p.max_dim = where.max_dim > 0 ? where.max_dim : b.max_dim();
  ASSERT_OK(CheckFeatureDescriptors(p, descriptors, b.features));
  absl::StatusOr<GatherTuning> tuning = GetGatherTuning(0);
  ASSERT_TRUE(tuning.ok()) << tuning.status();
  for (const int poison : {0xa5, 0x5a}) {
    ASSERT_OK(CudaStatus(cudaMemset(d_pooled->data(), poison, d_pooled->size()), "poison"));
    ASSERT_OK(CudaStatus(cudaMemset(d_unpooled->data(), poison, d_unpooled->size()), "poison"));
    for (DeviceTable& t : tables) {
      if (t.misses.data() != nullptr) {
        ASSERT_OK(CudaStatus(cudaMemset(t.misses.data(), 0, t.misses.size_bytes()), "zero"));
      }
    }
    ASSERT_OK(LaunchFeatureLookup(*tuning, p, stream->get()));
    ASSERT_OK(CudaStatus(cudaStreamSynchronize(stream->get()), "sync"));
    Answers got;
    ASSERT_OK(Download(*d_pooled, b.pooled_bytes(), poison, &got.pooled));
    ASSERT_OK(Download(*d_unpooled, b.unpooled_bytes(), poison, &got.unpooled));
    const std::string run = absl::StrCat(" (poison 0x", absl::Hex(poison), ")");
    ExpectSameElements(got.pooled, want.pooled, b, "pooled answer" + run);
    ExpectSameElements(got.unpooled, want.unpooled, b, "unpooled answer" + run);
    for (const int32_t i : where.two_tiers) {
      std::vector<unsigned long long> counters(CachedRows::kMissCounters);
      ASSERT_OK(
          CudaStatus(cudaMemcpy(counters.data(), tables[static_cast<size_t>(i)].misses.data(),
                                counters.size() * sizeof(counters[0]), cudaMemcpyDeviceToHost),
                     "download misses"));
      uint64_t sum = 0;
      for (const unsigned long long c : counters) {
        sum += c;
      }
      EXPECT_EQ(sum, ExpectedMisses(b, i)) << "host rows read from table " << i << run;
    }
  }
}

class FeatureGpuTest : public ::testing::Test {
 protected:
  void SetUp() override { EMB_SKIP_WITHOUT_GPU(); }
};

class FeatureGpuAnswerTest : public ::testing::TestWithParam<DataType> {
 protected:
  void SetUp() override { EMB_SKIP_WITHOUT_GPU(); }
};

// Every table type at dims 4, 64, 128 and 200 and a few odd ones (int4 rows of odd dim too), in
// one call: each table pooled (sum, mean, weighted sum, weighted mean in turn), some also unpooled
// or pooled twice; tables aligned and not, and lanes for the widest dim or for one element.
TEST_P(FeatureGpuAnswerTest, EveryTableTypeAndDimInOneCall) {
  std::mt19937 rng(static_cast<uint32_t>(GetParam()));
  Batch b;
  b.batch = 19;
  b.out_type = GetParam();
  uint32_t seed = 1;
  for (const DataType t : kAllTableTypes) {
    for (const int64_t dim : {4, 64, 128, 200}) {
      b.tables.push_back(MakeTable(t, 301, dim, seed++));
    }
  }
  b.tables.push_back(MakeTable(DataType::kInt4Rowwise, 50, 7, seed++));
  b.tables.push_back(MakeTable(DataType::kInt8Rowwise, 50, 13, seed++));
  b.tables.push_back(MakeTable(DataType::kFloat16, 50, 3, seed++));
  b.tables.push_back(MakeTable(DataType::kBFloat16, 50, 1, seed++));
  const Pooling poolings[2] = {Pooling::kSum, Pooling::kMean};
  for (int32_t i = 0; i < static_cast<int32_t>(b.tables.size()); ++i) {
    AddFeature(&b, Pooled(i, poolings[i % 2], i % 4 >= 2), 70, &rng);
    if (i % 3 == 0) {
      AddFeature(&b, Unpooled(i), 12, &rng);
    }
  }
  AddFeature(&b, Pooled(0, Pooling::kSum, true), 40, &rng);
  AddFeature(&b, Pooled(10, Pooling::kMean), 40, &rng);
  ExpectGpuMatchesCpu(b, Placement{});
  ExpectGpuMatchesCpu(b, Placement{true, 0, {}});
  ExpectGpuMatchesCpu(b, Placement{false, 1, {}});
  ExpectGpuMatchesCpu(b, Placement{true, 16, {}});
}

TEST_P(FeatureGpuAnswerTest, EmptyBagsGiveZeros) {
  Batch b;
  b.batch = 5;
  b.out_type = GetParam();
  b.tables.push_back(MakeTable(DataType::kInt4Rowwise, 10, 33, 5));
  b.tables.push_back(MakeTable(DataType::kFloat32, 10, 128, 6));
  std::mt19937 rng(7);
  AddFeature(&b, Pooled(0, Pooling::kMean), 0, &rng);
  AddFeature(&b, Pooled(1, Pooling::kSum, true), 0, &rng);
  AddFeature(&b, Unpooled(1), 0, &rng);
  AddFeature(&b, Pooled(1, Pooling::kMean, true), 0, &rng);
  ASSERT_EQ(b.ids.size(), 0u);
  b.ids.push_back(0);  // an id that no bag holds: the GPU must not read it
  ExpectGpuMatchesCpu(b, Placement{});
  for (const std::byte x : OnCpu(b).pooled) {
    ASSERT_EQ(static_cast<int>(x), 0);
  }
}

// One feature a call, of every pooling and table type.
TEST_P(FeatureGpuAnswerTest, OneFeature) {
  for (const DataType t : kAllTableTypes) {
    for (const FeatureSpec& f : {Pooled(0, Pooling::kSum), Pooled(0, Pooling::kMean, true),
                                 Pooled(0, Pooling::kSum, true), Unpooled(0)}) {
      SCOPED_TRACE(absl::StrCat(DataTypeName(t), ", pooling ", static_cast<int>(f.pooling),
                                f.weighted ? ", weighted" : ""));
      std::mt19937 rng(8);
      Batch b;
      b.batch = 33;
      b.out_type = GetParam();
      b.tables.push_back(MakeTable(t, 97, 96, 9));
      AddFeature(&b, f, 50, &rng);
      ExpectGpuMatchesCpu(b, Placement{});
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllAnswerTypes, FeatureGpuAnswerTest, ::testing::ValuesIn(kAllDataTypes),
                         [](const ::testing::TestParamInfo<DataType>& info) {
                           return std::string(DataTypeName(info.param));
                         });

// Tables in two tiers (mapped host rows, every third row cached) beside one in device memory:
// each row read from where its slot says, and the host rows read counted.
TEST_F(FeatureGpuTest, TablesInTwoTiers) {
  std::mt19937 rng(10);
  Batch b;
  b.batch = 23;
  b.out_type = DataType::kFloat16;
  b.tables.push_back(MakeTable(DataType::kFloat32, 200, 64, 11));
  b.tables.push_back(MakeTable(DataType::kInt8Rowwise, 200, 32, 12));
  b.tables.push_back(MakeTable(DataType::kInt4Rowwise, 200, 7, 13));
  b.tables.push_back(MakeTable(DataType::kBFloat16, 200, 200, 14));
  b.tables.push_back(MakeTable(DataType::kFloat32, 200, 128, 15));
  for (int32_t i = 0; i < 5; ++i) {
    AddFeature(&b, Pooled(i, i % 2 == 0 ? Pooling::kSum : Pooling::kMean, i == 1), 40, &rng);
    AddFeature(&b, Unpooled(i), 6, &rng);
  }
  ExpectGpuMatchesCpu(b, Placement{false, 0, {0, 1, 2, 3}});
  ExpectGpuMatchesCpu(b, Placement{true, 0, {0, 2, 3}});
}

// The benchmark's shape, smaller tables: 26 features over 4 tables of 50,000 x 128 float32,
// 1024 samples, bags of up to 40 ids.
TEST_F(FeatureGpuTest, LargeBatch) {
  std::mt19937 rng(16);
  Batch b;
  b.batch = 1024;
  for (uint32_t i = 0; i < 4; ++i) {
    b.tables.push_back(MakeTable(DataType::kFloat32, 50'000, 128, 17 + i));
  }
  for (int32_t f = 0; f < 26; ++f) {
    AddFeature(&b, Pooled(f % 4, f % 5 == 0 ? Pooling::kMean : Pooling::kSum, f % 3 == 0), 40,
               &rng);
  }
  ExpectGpuMatchesCpu(b, Placement{});
  b.out_type = DataType::kBFloat16;
  ExpectGpuMatchesCpu(b, Placement{});
}

TEST_F(FeatureGpuTest, NoBagsIsANoOp) {
  absl::StatusOr<GatherTuning> tuning = GetGatherTuning(0);
  ASSERT_TRUE(tuning.ok()) << tuning.status();
  FeatureLookupProblem p;  // every pointer null: with no bags none is looked at
  EXPECT_TRUE(LaunchFeatureLookup(*tuning, p, nullptr).ok());
  p.num_features = 4;
  EXPECT_TRUE(LaunchFeatureLookup(*tuning, p, nullptr).ok());
  p.num_features = 0;
  p.batch = 4;
  EXPECT_TRUE(LaunchFeatureLookup(*tuning, p, nullptr).ok());
}

TEST_F(FeatureGpuTest, RejectsBadArguments) {
  absl::StatusOr<GatherTuning> tuning = GetGatherTuning(0);
  ASSERT_TRUE(tuning.ok()) << tuning.status();
  // Never launched: every case is refused before the launch, which reads no pointer.
  int64_t host_word = 0;
  FeatureLookupProblem good;
  good.tables = reinterpret_cast<const FeatureTable*>(&host_word);
  good.num_tables = 1;
  good.features = reinterpret_cast<const FeatureSpec*>(&host_word);
  good.num_features = 2;
  good.batch = 3;
  good.ids = &host_word;
  good.offsets = &host_word;
  good.pooled_out = &host_word;
  good.pooled_width = 8;
  good.max_dim = 8;
  const auto code = [&](auto change) {
    FeatureLookupProblem p = good;
    change(p);
    return LaunchFeatureLookup(*tuning, p, nullptr).code();
  };
  constexpr auto kInvalid = absl::StatusCode::kInvalidArgument;
  EXPECT_EQ(code([](FeatureLookupProblem& p) { p.out_type = DataType::kInt4Rowwise; }), kInvalid);
  EXPECT_EQ(code([](FeatureLookupProblem& p) { p.out_type = static_cast<DataType>(0); }), kInvalid);
  EXPECT_EQ(code([](FeatureLookupProblem& p) { p.batch = -1; }), kInvalid);
  EXPECT_EQ(code([](FeatureLookupProblem& p) { p.num_features = -1; }), kInvalid);
  EXPECT_EQ(code([](FeatureLookupProblem& p) { p.num_tables = -1; }), kInvalid);
  EXPECT_EQ(code([](FeatureLookupProblem& p) { p.num_tables = 0; }), kInvalid);
  EXPECT_EQ(code([](FeatureLookupProblem& p) { p.tables = nullptr; }), kInvalid);
  EXPECT_EQ(code([](FeatureLookupProblem& p) { p.features = nullptr; }), kInvalid);
  EXPECT_EQ(code([](FeatureLookupProblem& p) { p.ids = nullptr; }), kInvalid);
  EXPECT_EQ(code([](FeatureLookupProblem& p) { p.offsets = nullptr; }), kInvalid);
  EXPECT_EQ(code([](FeatureLookupProblem& p) { p.pooled_width = -1; }), kInvalid);
  EXPECT_EQ(code([](FeatureLookupProblem& p) { p.pooled_out = nullptr; }), kInvalid);
  EXPECT_EQ(code([](FeatureLookupProblem& p) {
              p.pooled_out = nullptr;
              p.pooled_width = 0;
            }),
            kInvalid);  // no answer at all
  EXPECT_EQ(code([](FeatureLookupProblem& p) { p.max_dim = 0; }), kInvalid);
  EXPECT_EQ(code([](FeatureLookupProblem& p) { p.batch = int64_t{1} << 40; }), kInvalid);
  EXPECT_EQ(LaunchFeatureLookup(GatherTuning{}, good, nullptr).code(),
            absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace emb::kernels::feature_gpu_test
