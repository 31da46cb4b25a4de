// Tests CpuFeatureLookup (kernels/cpu_feature_lookup.h) against a naive loop over features,
// samples, ids and columns, bit for bit, on random tables that hold no zeros, and its refusals.
#include "kernels/cpu_feature_lookup.h"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "kernels/data_type.h"
#include "kernels/feature_lookup_problem.h"
#include "kernels/quantize.h"
#include "tests/kernels/feature_batch.h"

namespace emb::kernels::cpu_feature_lookup_test {
namespace {

using ::emb::testing::AddFeature;
using ::emb::testing::Batch;
using ::emb::testing::HostTable;
using ::emb::testing::Pooled;
using ::emb::testing::Unpooled;

// A table's host rows of `type` (float32 or float16), random values in (-2, 2), never zero.
HostTable RandomTable(DataType type, int64_t rows, int64_t dim, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> value(-2.0f, 2.0f);
  HostTable t{type, rows, dim, std::vector<std::byte>(RowBytes(type, dim) * rows)};
  for (int64_t i = 0; i < rows * dim; ++i) {
    const float x = value(rng);
    StoreFromFloat(t.bytes.data(), type, i, x == 0.0f ? 0.5f : x);
  }
  return t;
}

// The problem over `b` on the host, its descriptors in `tables`, its answers in `pooled` and
// `unpooled`: each one guard byte longer than the answer, every byte 0xa5.
FeatureLookupProblem Problem(const Batch& b, std::vector<FeatureTable>* tables,
                             std::vector<std::byte>* pooled, std::vector<std::byte>* unpooled) {
  *tables = ::emb::testing::HostDescriptors(b);
  pooled->assign(b.pooled_bytes() + 1, std::byte{0xa5});
  unpooled->assign(b.unpooled_bytes() + 1, std::byte{0xa5});
  return ::emb::testing::HostProblem(b, *tables, pooled->data(), unpooled->data());
}

// The answers by a naive loop: per feature, sample, column and id, in float32, one rounding per
// product and per sum, a mean as the sum times 1 / length.
void NaiveLookup(const Batch& b, std::vector<std::byte>* pooled, std::vector<std::byte>* unpooled) {
  for (size_t f = 0; f < b.features.size(); ++f) {
    const FeatureSpec& spec = b.features[f];
    const HostTable& t = b.tables[static_cast<size_t>(spec.table)];
    const size_t row_bytes = RowBytes(t.type, t.dim);
    const int64_t feature_first = b.offsets[f * static_cast<size_t>(b.batch)];
    for (int64_t s = 0; s < b.batch; ++s) {
      const int64_t begin = b.offsets[f * static_cast<size_t>(b.batch) + s];
      const int64_t end = b.offsets[f * static_cast<size_t>(b.batch) + s + 1];
      for (int64_t j = 0; j < t.dim; ++j) {
        float acc = 0.0f;
        for (int64_t k = begin; k < end; ++k) {
          const auto* row = reinterpret_cast<const uint8_t*>(t.bytes.data()) +
                            static_cast<size_t>(b.ids[k]) * row_bytes;
          const float x = LoadRowElement(row, t.type, t.dim, j);
          if (spec.pooling == Pooling::kNone) {
            StoreFromFloat(unpooled->data(), b.out_type,
                           spec.out_offset + (k - feature_first) * t.dim + j, x);
            continue;
          }
          const float product = spec.weighted ? b.weights[k] * x : x;
          acc = acc + product;
        }
        if (spec.pooling == Pooling::kMean) {
          const float scale = end > begin ? 1.0f / static_cast<float>(end - begin) : 0.0f;
          acc = acc * scale;
        }
        if (spec.pooling != Pooling::kNone) {
          StoreFromFloat(pooled->data(), b.out_type, s * b.pooled_width + spec.out_column + j, acc);
        }
      }
    }
  }
}

void ExpectMatchesNaive(const Batch& b) {
  std::vector<FeatureTable> tables;
  std::vector<std::byte> pooled;
  std::vector<std::byte> unpooled;
  const FeatureLookupProblem p = Problem(b, &tables, &pooled, &unpooled);
  std::vector<std::byte> want_pooled = pooled;
  std::vector<std::byte> want_unpooled = unpooled;
  NaiveLookup(b, &want_pooled, &want_unpooled);
  const absl::Status s = CpuFeatureLookup(p);
  ASSERT_TRUE(s.ok()) << s;
  const size_t element = ElementSize(b.out_type);
  for (size_t e = 0; e < pooled.size() / element; ++e) {
    ASSERT_EQ(std::memcmp(pooled.data() + e * element, want_pooled.data() + e * element, element),
              0)
        << DataTypeName(b.out_type) << " pooled element " << e;
  }
  ASSERT_EQ(pooled, want_pooled);  // the guard byte too
  ASSERT_EQ(unpooled, want_unpooled);
}

TEST(CpuFeatureLookup, MixedFeaturesMatchANaiveLoop) {
  for (const DataType out_type : kAllDataTypes) {
    std::mt19937 rng(static_cast<uint32_t>(out_type));
    Batch b;
    b.batch = 9;
    b.out_type = out_type;
    b.tables.push_back(RandomTable(DataType::kFloat32, 50, 8, 1));
    b.tables.push_back(RandomTable(DataType::kFloat16, 30, 5, 2));
    b.tables.push_back(RandomTable(DataType::kFloat32, 70, 3, 3));
    AddFeature(&b, Pooled(0, Pooling::kSum), 6, &rng);
    AddFeature(&b, Pooled(1, Pooling::kMean), 5, &rng);
    AddFeature(&b, Pooled(0, Pooling::kSum, true), 7, &rng);
    AddFeature(&b, Unpooled(1), 4, &rng);
    AddFeature(&b, Pooled(2, Pooling::kMean, true), 9, &rng);
    AddFeature(&b, Pooled(2, Pooling::kNone, true), 3, &rng);  // weights don't apply unpooled
    AddFeature(&b, Pooled(1, Pooling::kSum, true), 2, &rng);
    SCOPED_TRACE(DataTypeName(out_type));
    ExpectMatchesNaive(b);
  }
}

TEST(CpuFeatureLookup, EmptyBagsGiveZeros) {
  std::mt19937 rng(4);
  Batch b;
  b.batch = 4;
  b.tables.push_back(RandomTable(DataType::kFloat16, 10, 6, 5));
  AddFeature(&b, Pooled(0, Pooling::kSum), 0, &rng);
  AddFeature(&b, Pooled(0, Pooling::kMean, true), 0, &rng);
  AddFeature(&b, Unpooled(0), 0, &rng);
  ASSERT_TRUE(b.ids.empty());
  b.ids.push_back(0);  // an id that no bag holds (ids may not be null)
  ExpectMatchesNaive(b);
  std::vector<FeatureTable> tables;
  std::vector<std::byte> pooled;
  std::vector<std::byte> unpooled;
  ASSERT_TRUE(CpuFeatureLookup(Problem(b, &tables, &pooled, &unpooled)).ok());
  pooled.pop_back();  // the guard byte
  for (const std::byte x : pooled) {
    ASSERT_EQ(static_cast<int>(x), 0);
  }
}

TEST(CpuFeatureLookup, OneFeature) {
  for (const Pooling pooling : {Pooling::kSum, Pooling::kMean, Pooling::kNone}) {
    std::mt19937 rng(6);
    Batch b;
    b.batch = 17;
    b.out_type = DataType::kBFloat16;
    b.tables.push_back(RandomTable(DataType::kFloat32, 40, 16, 7));
    AddFeature(&b, Pooled(0, pooling, true), 5, &rng);
    ExpectMatchesNaive(b);
  }
}

TEST(CpuFeatureLookup, NoBagsIsANoOp) {
  FeatureLookupProblem p;  // every pointer null: with no bags none is looked at
  EXPECT_TRUE(CpuFeatureLookup(p).ok());
  p.num_features = 3;
  EXPECT_TRUE(CpuFeatureLookup(p).ok());
}

TEST(CpuFeatureLookup, RejectsBadArguments) {
  std::mt19937 rng(8);
  Batch b;
  b.batch = 3;
  b.tables.push_back(RandomTable(DataType::kFloat32, 10, 4, 9));
  AddFeature(&b, Pooled(0, Pooling::kSum), 3, &rng);
  AddFeature(&b, Unpooled(0), 3, &rng);
  std::vector<FeatureTable> descriptors;
  std::vector<std::byte> pooled;
  std::vector<std::byte> unpooled;
  const FeatureLookupProblem good = Problem(b, &descriptors, &pooled, &unpooled);
  ASSERT_TRUE(CpuFeatureLookup(good).ok());
  const auto code = [&](auto change) {
    FeatureLookupProblem p = good;
    std::vector<FeatureTable> tables = descriptors;
    std::vector<FeatureSpec> features = b.features;
    p.tables = tables.data();
    p.features = features.data();
    change(p, tables, features);
    return CpuFeatureLookup(p).code();
  };
  using T = std::vector<FeatureTable>;
  using F = std::vector<FeatureSpec>;
  constexpr auto kInvalid = absl::StatusCode::kInvalidArgument;
  EXPECT_EQ(code([](FeatureLookupProblem& p, T&, F&) { p.out_type = DataType::kInt8Rowwise; }),
            kInvalid);
  EXPECT_EQ(code([](FeatureLookupProblem& p, T&, F&) { p.batch = -1; }), kInvalid);
  EXPECT_EQ(code([](FeatureLookupProblem& p, T&, F&) { p.num_tables = 0; }), kInvalid);
  EXPECT_EQ(code([](FeatureLookupProblem& p, T&, F&) { p.ids = nullptr; }), kInvalid);
  EXPECT_EQ(code([](FeatureLookupProblem& p, T&, F&) { p.offsets = nullptr; }), kInvalid);
  EXPECT_EQ(code([](FeatureLookupProblem& p, T&, F&) { p.max_dim = 0; }), kInvalid);
  EXPECT_EQ(code([](FeatureLookupProblem& p, T&, F&) { p.pooled_out = nullptr; }), kInvalid);
  EXPECT_EQ(code([](FeatureLookupProblem& p, T&, F&) { p.unpooled_out = nullptr; }), kInvalid);
  EXPECT_EQ(code([](FeatureLookupProblem& p, T&, F&) { p.pooled_width = 3; }), kInvalid);
  EXPECT_EQ(code([](FeatureLookupProblem&, T& t, F&) { t[0].dim = 0; }), kInvalid);
  EXPECT_EQ(code([](FeatureLookupProblem&, T& t, F&) { t[0].type = static_cast<DataType>(7); }),
            kInvalid);
  EXPECT_EQ(code([](FeatureLookupProblem&, T& t, F&) { t[0].rows = nullptr; }), kInvalid);
  EXPECT_EQ(code([](FeatureLookupProblem&, T&, F& f) { f[0].table = 1; }), kInvalid);
  EXPECT_EQ(code([](FeatureLookupProblem&, T&, F& f) { f[0].out_column = 1; }), kInvalid);
  EXPECT_EQ(code([](FeatureLookupProblem&, T&, F& f) { f[1].out_offset = -1; }), kInvalid);
  EXPECT_EQ(code([](FeatureLookupProblem&, T&, F& f) { f[0].pooling = static_cast<Pooling>(3); }),
            kInvalid);
  const int32_t slots[10] = {};
  EXPECT_EQ(code([&](FeatureLookupProblem&, T& t, F&) {
              t[0].cached.slots = slots;
              t[0].cached.cache = t[0].rows;
            }),
            kInvalid);  // two tiers: the GPU's
  EXPECT_EQ(code([&](FeatureLookupProblem&, T& t, F&) { t[0].cached.slots = slots; }), kInvalid);
}

}  // namespace
}  // namespace emb::kernels::cpu_feature_lookup_test
