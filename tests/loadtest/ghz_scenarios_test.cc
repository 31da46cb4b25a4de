// Every ghz scenario in deploy/loadtest/ is one ghz can run and our server answers: the file
// reads as a ghz config (JSON first, as ghz parses it), and each message of its call data, with
// its templates filled, parses into an embedding.v1.LookUpRequest through protobuf's JSON
// parser, with ids in the demo table's range, a shape that fits them, and the dtype its name says.
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "client/bench/call_data.h"
#include "client/bench/ghz_config.h"
#include "gtest/gtest.h"

namespace emb::client {
namespace {

namespace pb = ::embedding::v1;

constexpr int64_t kDemoRows = 100000;  // the default demo table, which the README serves

std::vector<std::string> ScenarioNames() {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(EMB_LOADTEST_DIR)) {
    if (entry.path().extension() == ".json") {
      names.push_back(entry.path().stem().string());
    }
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::string Path(const std::string& name) {
  return std::string(EMB_LOADTEST_DIR) + "/" + name + ".json";
}

TEST(GhzScenarios, CoverSmallAndLargeInEveryDtypeSkewAndRamp) {
  const std::vector<std::string> names = ScenarioNames();
  const std::set<std::string> have(names.begin(), names.end());
  for (const char* want : {"small-float32", "small-float16", "small-bfloat16", "large-float32",
                           "large-float16", "large-bfloat16", "skewed-float32", "ramp"}) {
    EXPECT_EQ(have.count(want), 1u) << want;
  }
}

class GhzScenario : public ::testing::TestWithParam<std::string> {};

TEST_P(GhzScenario, IsAGhzConfigForLookUpThroughReflection) {
  absl::StatusOr<GhzConfig> config = ReadGhzConfig(Path(GetParam()));
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->call, kLookUpCall);
  EXPECT_TRUE(config->insecure);  // our server speaks plaintext unless given a certificate
  EXPECT_GE(config->concurrency, 1);
  EXPECT_GT(config->total, config->concurrency);
}

TEST_P(GhzScenario, CallDataFillsIntoLookUpRequests) {
  absl::StatusOr<GhzConfig> config = ReadGhzConfig(Path(GetParam()));
  ASSERT_TRUE(config.ok()) << config.status();
  const std::string& name = GetParam();
  const pb::DataType want_dtype = absl::EndsWith(name, "bfloat16")  ? pb::DATA_TYPE_BFLOAT16
                                  : absl::EndsWith(name, "float16") ? pb::DATA_TYPE_FLOAT16
                                                                    : pb::DATA_TYPE_FLOAT32;
  BenchRng rng(1);
  for (const std::string& data : config->data) {
    absl::StatusOr<CallTemplate> t = CallTemplate::Parse(data);
    ASSERT_TRUE(t.ok()) << t.status();
    std::set<int64_t> distinct;
    for (int i = 0; i < 50; ++i) {
      absl::StatusOr<std::string> filled = t->Fill(rng);
      ASSERT_TRUE(filled.ok()) << filled.status();
      absl::StatusOr<pb::LookUpRequest> r = ParseLookUpRequestJson(*filled);
      ASSERT_TRUE(r.ok()) << r.status();
      EXPECT_EQ(t->num_actions(), r->ids_size()) << "every id is drawn anew for each call";
      int64_t product = 1;
      for (int64_t d : r->shape()) {
        product *= d;
      }
      EXPECT_EQ(product, r->ids_size());
      EXPECT_EQ(r->dtype(), want_dtype);
      EXPECT_EQ(r->table(), "");  // the server's default table
      for (int64_t id : r->ids()) {
        ASSERT_GE(id, 0);
        ASSERT_LT(id, kDemoRows);
        distinct.insert(id);
      }
      if (absl::StartsWith(name, "large")) {
        EXPECT_EQ(r->ids_size(), 2048);
      } else {
        EXPECT_EQ(r->ids_size(), 16);
      }
    }
    EXPECT_GT(distinct.size(), 100u) << "the ids vary from call to call";
  }
}

TEST_P(GhzScenario, ReceiveLimitFitsTheAnswerAtDim768) {
  absl::StatusOr<GhzConfig> config = ReadGhzConfig(Path(GetParam()));
  ASSERT_TRUE(config.ok()) << config.status();
  BenchRng rng(1);
  absl::StatusOr<pb::LookUpRequest> r = FillCallData(config->data.front(), rng);
  ASSERT_TRUE(r.ok()) << r.status();
  const int64_t element = r->dtype() == pb::DATA_TYPE_FLOAT32 ? 4 : 2;
  const int64_t answer = r->ids_size() * 768 * element;
  // No limit (-1, ghz 0.121.0's default where a file sets none) or one that fits the answer.
  EXPECT_TRUE(config->max_recv_message_bytes == -1 ||
              config->max_recv_message_bytes > answer + 1024)
      << "limit " << config->max_recv_message_bytes << ", answer of " << answer << " bytes";
}

TEST(GhzScenarios, SkewedSendsMostIdsToTheHottestPercent) {
  absl::StatusOr<GhzConfig> config = ReadGhzConfig(Path("skewed-float32"));
  ASSERT_TRUE(config.ok()) << config.status();
  BenchRng rng(1);
  int64_t hot = 0;
  int64_t all = 0;
  for (int i = 0; i < 2000; ++i) {
    absl::StatusOr<pb::LookUpRequest> r = FillCallData(config->data.front(), rng);
    ASSERT_TRUE(r.ok()) << r.status();
    for (int64_t id : r->ids()) {
      hot += id < kDemoRows / 100;
      ++all;
    }
  }
  EXPECT_NEAR(static_cast<double>(hot) / all, 13.0 / 16 + 3.0 / 16 / 100, 0.01);
}

INSTANTIATE_TEST_SUITE_P(DeployLoadtest, GhzScenario, ::testing::ValuesIn(ScenarioNames()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string name = info.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

}  // namespace
}  // namespace emb::client
