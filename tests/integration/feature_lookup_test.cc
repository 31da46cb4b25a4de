// LookUpFeatures (every sparse feature of a batch of samples in one call) against the real
// embedding-server binary on loopback: features over tables of every kind (float32 of two dims,
// float16, int8 quantized, one table shared by two features), pooled (sum, weighted sum, mean)
// and unpooled, bags given as lengths, offsets or one id a sample, empty bags; each feature's
// answer compared element by element with the CPU reference (kernels/cpu_gather.h), bit for bit.
// Malformed calls are refused naming the feature, its table and the limit; concurrent feature
// calls and LookUps on the same tables share batches and each gets its own rows. On the GPU
// through scripts/gpu-check.
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "client/embedding_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/cpu_gather.h"
#include "kernels/data_type.h"
#include "kernels/quantize_rows.h"
#include "tests/testing/loaded_server.h"
#include "tests/testing/metrics_text.h"
#include "tests/testing/server_process.h"
#include "tests/testing/table_files.h"

namespace emb::feature_lookup_test {
namespace {

using client::FeatureSpec;
using client::FeaturesResult;
using client::Pooling;
using ::testing::HasSubstr;
using testing::ServerProcess;

constexpr int64_t kRows = 300;
constexpr absl::Duration kTimeout = absl::Seconds(60);

// A table as the server holds it: its rows in their served type.
struct Table {
  std::string name;
  DataType type;
  int64_t dim;
  std::string bytes;  // kRows rows of `type`
};

// A feature's bags as offsets, and the spec that sends them (as lengths, offsets, or one id a
// sample).
struct Planned {
  FeatureSpec spec;
  const Table* table;
  std::vector<int64_t> offsets;
};

enum class Given { kLengths, kOffsets, kOneIdEach };

Planned RandomFeature(const Table& t, int64_t batch, Pooling pooling, Given given, bool weighted,
                      uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int64_t> id(0, kRows - 1);
  std::uniform_int_distribution<int64_t> length(0, 6);  // empty bags among them
  std::uniform_real_distribution<float> weight(-2.0f, 2.0f);
  Planned p{FeatureSpec{}, &t, {0}};
  p.spec.name = absl::StrCat("f_", t.name, "_", seed);
  p.spec.table = t.name;
  p.spec.pooling = pooling;
  for (int64_t s = 0; s < batch; ++s) {
    const int64_t len = given == Given::kOneIdEach ? 1 : length(rng);
    for (int64_t k = 0; k < len; ++k) {
      p.spec.ids.push_back(id(rng));
      if (weighted) {
        p.spec.weights.push_back(weight(rng));
      }
    }
    p.offsets.push_back(static_cast<int64_t>(p.spec.ids.size()));
    if (given == Given::kLengths) {
      p.spec.lengths.push_back(len);
    }
  }
  if (given == Given::kOffsets) {
    p.spec.offsets = p.offsets;
  }
  return p;
}

// The feature's rows as the server must answer them: CpuPooledGather's (pooled) or CpuGather's.
std::string Expected(const Planned& p, DataType out) {
  const Table& t = *p.table;
  const auto* rows = reinterpret_cast<const std::byte*>(t.bytes.data());
  if (p.spec.pooling == Pooling::kNone) {
    std::string want(p.spec.ids.size() * t.dim * ElementSize(out), '\0');
    kernels::CpuGather(rows, t.type, t.dim, p.spec.ids, out,
                       reinterpret_cast<std::byte*>(want.data()));
    return want;
  }
  std::vector<float> scales;
  if (p.spec.pooling == Pooling::kMean) {
    for (size_t b = 0; b + 1 < p.offsets.size(); ++b) {
      const int64_t len = p.offsets[b + 1] - p.offsets[b];
      scales.push_back(len > 0 ? 1.0f / static_cast<float>(len) : 0.0f);
    }
  }
  std::string want((p.offsets.size() - 1) * t.dim * ElementSize(out), '\0');
  kernels::CpuPooledGather(rows, t.type, t.dim,
                           kernels::Bags{p.spec.ids, p.offsets, p.spec.weights, scales}, out,
                           reinterpret_cast<std::byte*>(want.data()));
  return want;
}

// "" when `got` holds every feature's rows of `features` as Expected says, bit for bit; else the
// first feature (and sample) that differs.
std::string Mismatch(const std::vector<Planned>& features, int64_t batch, DataType out,
                     const FeaturesResult& got) {
  if (got.features.size() != features.size() || got.batch_size != batch) {
    return absl::StrCat("answered ", got.features.size(), " features for ", batch, " samples");
  }
  const size_t element = ElementSize(out);
  for (size_t f = 0; f < features.size(); ++f) {
    const Planned& p = features[f];
    const FeaturesResult::Feature& a = got.features[f];
    const std::string want = Expected(p, out);
    const size_t row = static_cast<size_t>(p.table->dim) * element;
    if (a.name != p.spec.name || a.dim != p.table->dim ||
        a.pooled != (p.spec.pooling != Pooling::kNone)) {
      return absl::StrCat("feature ", f, ": answered as '", a.name, "' of dim ", a.dim);
    }
    if (!a.pooled) {
      if (a.embeddings != want) {
        return absl::StrCat("feature ", f, " (unpooled): not CpuGather's bits");
      }
      continue;
    }
    for (int64_t s = 0; s < batch; ++s) {
      const size_t at = (static_cast<size_t>(s * got.pooled_width + a.pooled_column)) * element;
      if (got.pooled.compare(at, row, want, static_cast<size_t>(s) * row, row) != 0) {
        return absl::StrCat("feature ", f, " sample ", s, ": not CpuPooledGather's bits");
      }
    }
  }
  return "";
}

class FeatureLookUpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (auto missing = testing::TestDeviceMissing()) {
      GTEST_SKIP() << *missing;
    }
    std::vector<std::string> args = {"--drain_seconds=0", "--max_queue_delay_us=1000",
                                     "--max_features_per_call=8", "--max_feature_call_ids=3000"};
    uint64_t seed = 11;
    struct Kind {
      const char* name;
      DataType type;
      int64_t dim;
    };
    for (const Kind& k :
         {Kind{"users", DataType::kFloat32, 24}, Kind{"items", DataType::kFloat32, 40},
          Kind{"half", DataType::kFloat16, 16}}) {
      Table t{k.name, k.type, k.dim, testing::RandomRows(k.type, kRows * k.dim, seed++)};
      const char* st = k.type == DataType::kFloat32 ? "F32" : "F16";
      const std::string path = dir_.File(absl::StrCat(k.name, ".safetensors"));
      ASSERT_TRUE(
          testing::WriteFile(path, testing::SafetensorsFile({{"w", st, {kRows, k.dim}, t.bytes}}))
              .ok());
      args.push_back(absl::StrCat("--table=", k.name, "=", path));
      tables_.push_back(std::move(t));
    }
    // Quantized to int8 at load: the reference reads the same quantized rows.
    const std::string floats = testing::RandomRows(DataType::kFloat32, kRows * 20, seed++);
    Table q{"q8", DataType::kInt8Rowwise, 20,
            std::string(kRows * RowBytes(DataType::kInt8Rowwise, 20), '\0')};
    ASSERT_TRUE(EncodeRows(reinterpret_cast<const std::byte*>(floats.data()), DataType::kFloat32,
                           kRows, 20, q.type, reinterpret_cast<std::byte*>(q.bytes.data()))
                    .ok());
    const std::string path = dir_.File("q8.safetensors");
    ASSERT_TRUE(
        testing::WriteFile(path, testing::SafetensorsFile({{"w", "F32", {kRows, 20}, floats}}))
            .ok());
    args.push_back(absl::StrCat("--table=q8=", path, ",quantize=int8"));
    tables_.push_back(std::move(q));
    auto server = ServerProcess::Start(args);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    client_ =
        std::make_unique<client::EmbeddingClient>(client::CreateInsecureChannel(server_->target()));
  }

  // Features over every table: pooled three ways and unpooled, bags given every way, and a second
  // feature on the first table.
  std::vector<Planned> MixedFeatures(int64_t batch, uint64_t seed) const {
    return {RandomFeature(tables_[0], batch, Pooling::kSum, Given::kLengths, false, seed),
            RandomFeature(tables_[1], batch, Pooling::kMean, Given::kOffsets, false, seed + 1),
            RandomFeature(tables_[2], batch, Pooling::kNone, Given::kLengths, false, seed + 2),
            RandomFeature(tables_[3], batch, Pooling::kSum, Given::kOneIdEach, true, seed + 3),
            RandomFeature(tables_[0], batch, Pooling::kSum, Given::kOffsets, true, seed + 4),
            RandomFeature(tables_[1], batch, Pooling::kNone, Given::kOneIdEach, false, seed + 5)};
  }

  static std::vector<FeatureSpec> Specs(const std::vector<Planned>& features) {
    std::vector<FeatureSpec> specs;
    for (const Planned& p : features) {
      specs.push_back(p.spec);
    }
    return specs;
  }

  testing::TempDir dir_;
  std::vector<Table> tables_;
  std::unique_ptr<ServerProcess> server_;
  std::unique_ptr<client::EmbeddingClient> client_;
};

TEST_F(FeatureLookUpTest, EveryFeatureMatchesTheCpuReferenceInEveryAnswerType) {
  uint64_t seed = 100;
  for (DataType out : {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16}) {
    for (int64_t batch : {1, 7, 64}) {
      const std::vector<Planned> features = MixedFeatures(batch, seed);
      seed += 10;
      auto got = client_->LookUpFeatures(batch, Specs(features), out, kTimeout);
      ASSERT_TRUE(got.ok()) << got.status();
      EXPECT_EQ(got->dtype, out);
      EXPECT_EQ(got->pooled_width, 24 + 40 + 20 + 24);  // the pooled features' dims
      EXPECT_EQ(Mismatch(features, batch, out, *got), "")
          << DataTypeName(out) << ", batch " << batch;
    }
  }
  // One feature, and a call of only unpooled features (no pooled rows).
  const std::vector<Planned> one = {
      RandomFeature(tables_[1], 5, Pooling::kMean, Given::kLengths, false, 7)};
  auto got = client_->LookUpFeatures(5, Specs(one), std::nullopt, kTimeout);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(Mismatch(one, 5, DataType::kFloat32, *got), "");
  const std::vector<Planned> unpooled = {
      RandomFeature(tables_[0], 3, Pooling::kNone, Given::kOffsets, false, 8)};
  got = client_->LookUpFeatures(3, Specs(unpooled), std::nullopt, kTimeout);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->pooled_width, 0);
  EXPECT_TRUE(got->pooled.empty());
  EXPECT_EQ(Mismatch(unpooled, 3, DataType::kFloat32, *got), "");
  // The calls are counted.
  auto metrics = testing::HttpGet(server_->metrics_port(), "/metrics");
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  EXPECT_EQ(testing::Sample(*metrics, "embedding_feature_call_features_count"), 11);
}

TEST_F(FeatureLookUpTest, MalformedCallsAreRefusedNamingTheFeatureTableAndLimit) {
  auto refused = [&](int64_t batch, std::vector<FeatureSpec> specs) {
    auto got = client_->LookUpFeatures(batch, specs, std::nullopt, kTimeout);
    EXPECT_FALSE(got.ok());
    return got.status();
  };
  const FeatureSpec good =
      RandomFeature(tables_[0], 4, Pooling::kSum, Given::kLengths, false, 1).spec;
  auto with = [&](auto change) {
    FeatureSpec s = good;
    s.name = "clicks";
    change(s);
    return std::vector<FeatureSpec>{good, s};
  };
  absl::Status s = refused(4, {});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("no features"));
  s = refused(4, with([](FeatureSpec& f) { f.table = "nope"; }));
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr("feature 1 'clicks', table 'nope': unknown table"));
  s = refused(4, with([](FeatureSpec& f) { f.lengths.back() += 1; }));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("feature 1 'clicks', table 'users': lengths"));
  s = refused(4, with([](FeatureSpec& f) { f.lengths.push_back(0); }));  // 5 samples, not 4
  EXPECT_THAT(s.message(), HasSubstr("lengths has 5 values; give one per sample (batch_size 4)"));
  s = refused(4, with([](FeatureSpec& f) { f.ids[0] = kRows; }));
  EXPECT_EQ(s.code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(s.message(), HasSubstr("feature 1 'clicks', table 'users': ids[0] = 300 is out of "
                                     "range for table 'users' with 300 rows"));
  s = refused(4, with([](FeatureSpec& f) {
                f.pooling = Pooling::kMean;
                f.weights.assign(f.ids.size(), 1.0f);
              }));
  EXPECT_THAT(s.message(), HasSubstr("weights need POOLING_SUM"));
  s = refused(4, with([](FeatureSpec& f) {
                f.pooling = Pooling::kNone;
                f.weights.assign(f.ids.size(), 1.0f);
              }));
  EXPECT_THAT(s.message(), HasSubstr("weights need pooling"));
  s = refused(4, with([](FeatureSpec& f) {
                f.lengths.clear();
                f.ids.resize(3);
              }));
  EXPECT_THAT(s.message(), HasSubstr("one id per sample, but ids has 3 for batch_size 4"));
  s = refused(0, {good});
  EXPECT_THAT(s.message(), HasSubstr("batch_size is 0"));
  s = refused(4, std::vector<FeatureSpec>(9, good));
  EXPECT_THAT(s.message(), HasSubstr("9 features exceed the limit of 8 features per call "
                                     "(--max_features_per_call)"));
  FeatureSpec big = good;
  big.lengths = {1000, 1000, 1000, 1};
  big.ids.assign(3001, 5);
  s = refused(4, {big});
  EXPECT_THAT(s.message(), HasSubstr("3001 ids in all features exceed the limit of 3000 ids per "
                                     "call (--max_feature_call_ids)"));
  // The server serves on.
  auto got = client_->LookUpFeatures(4, {good}, std::nullopt, kTimeout);
  EXPECT_TRUE(got.ok()) << got.status();
}

TEST_F(FeatureLookUpTest, ConcurrentFeatureCallsAndLookUpsEachGetTheirOwnRows) {
  constexpr int kThreads = 6;
  constexpr int kCalls = 15;
  std::vector<std::string> failures(kThreads);
  std::vector<std::thread> threads;
  for (int c = 0; c < kThreads; ++c) {
    threads.emplace_back([&, c] {
      for (int i = 0; i < kCalls && failures[c].empty(); ++i) {
        const uint64_t seed = 1000 + c * 100 + i;
        if (c % 3 == 2) {  // a plain LookUp caller on the same tables, sharing their batches
          const Planned p =
              RandomFeature(tables_[1], 9, Pooling::kNone, Given::kOneIdEach, false, seed);
          auto got = client_->LookUp("items", p.spec.ids, {}, DataType::kFloat32, kTimeout);
          if (!got.ok() || got->data != Expected(p, DataType::kFloat32)) {
            failures[c] = absl::StrCat("LookUp ", i, ": ", got.status().ToString());
          }
          continue;
        }
        const std::vector<Planned> features = MixedFeatures(1 + i % 9, seed);
        auto got =
            client_->LookUpFeatures(1 + i % 9, Specs(features), DataType::kFloat32, kTimeout);
        failures[c] = !got.ok() ? got.status().ToString()
                                : Mismatch(features, 1 + i % 9, DataType::kFloat32, *got);
      }
    });
  }
  for (std::thread& t : threads) {
    t.join();
  }
  for (int c = 0; c < kThreads; ++c) {
    EXPECT_EQ(failures[c], "") << "caller " << c;
  }
}

}  // namespace
}  // namespace emb::feature_lookup_test
