#include "client/bench/call_data.h"

#include <cstdint>
#include <set>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace emb::client::call_data_test {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(CallTemplate, TextWithoutActionsIsUnchanged) {
  absl::StatusOr<CallTemplate> t = CallTemplate::Parse(R"({"ids":["1","2"]})");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->num_actions(), 0);
  BenchRng rng(1);
  EXPECT_EQ(*t->Fill(rng), R"({"ids":["1","2"]})");
}

TEST(CallTemplate, RandomIntIsUniformInHalfOpenRange) {
  absl::StatusOr<CallTemplate> t = CallTemplate::Parse("{{randomInt 3 7}}");
  ASSERT_TRUE(t.ok()) << t.status();
  BenchRng rng(1);
  std::set<std::string> seen;
  for (int i = 0; i < 1000; ++i) {
    seen.insert(*t->Fill(rng));
  }
  EXPECT_EQ(seen, (std::set<std::string>{"3", "4", "5", "6"}));
}

TEST(CallTemplate, FillsEveryActionIndependently) {
  absl::StatusOr<CallTemplate> t =
      CallTemplate::Parse(R"(["{{ randomInt 0 1000000 }}", "{{randomInt 0 1000000}}"])");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->num_actions(), 2);
  BenchRng rng(5);
  const std::string a = *t->Fill(rng);
  const std::string b = *t->Fill(rng);
  EXPECT_NE(a, b);
  BenchRng again(5);
  EXPECT_EQ(*t->Fill(again), a);  // seeded: runs repeat
}

TEST(CallTemplate, NestedRandomIntStaysBelowItsBound) {
  absl::StatusOr<CallTemplate> t = CallTemplate::Parse("{{randomInt 0 (randomInt 1 10)}}");
  ASSERT_TRUE(t.ok()) << t.status();
  BenchRng rng(2);
  for (int i = 0; i < 1000; ++i) {
    int64_t v;
    ASSERT_TRUE(absl::SimpleAtoi(*t->Fill(rng), &v));
    ASSERT_GE(v, 0);
    ASSERT_LT(v, 9);
  }
}

TEST(CallTemplate, RefusesWhatItDoesNotKnow) {
  for (const char* text : {"{{.RequestNumber}}", "{{randomString 8}}", "{{randomInt 0}}",
                           "{{randomInt 5 5}}", "{{randomInt -1 5}}", "{{randomInt 0 5", "x}}",
                           "{{randomInt 0 5 6}}", "{{(randomInt 0 5}}"}) {
    absl::StatusOr<CallTemplate> t = CallTemplate::Parse(text);
    EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument) << text;
  }
}

TEST(FillCallData, ParsesQuotedInt64IdsAndTheDtypeName) {
  BenchRng rng(1);
  absl::StatusOr<embedding::v1::LookUpRequest> r = FillCallData(
      R"({"ids":["{{randomInt 0 10}}","9007199254740993"],"shape":[2],"dtype":"DATA_TYPE_BFLOAT16"})",
      rng);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->ids_size(), 2);
  EXPECT_LT(r->ids(0), 10);
  EXPECT_EQ(r->ids(1), 9007199254740993);  // exact: int64 as a string
  EXPECT_EQ(r->dtype(), embedding::v1::DATA_TYPE_BFLOAT16);
}

TEST(FillCallData, ParsesPooledFieldsInGhzJson) {
  BenchRng rng(1);
  // Offsets as numbers or quoted (proto3 JSON takes int64 both ways), weights as numbers.
  absl::StatusOr<embedding::v1::LookUpRequest> r = FillCallData(
      R"({"ids":["{{randomInt 0 10}}","4","5"],"pooling":"POOLING_SUM","offsets":[0,"1",3],)"
      R"("weights":[0.5,-2,1.25]})",
      rng);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->pooling(), embedding::v1::POOLING_SUM);
  EXPECT_THAT(r->offsets(), ElementsAre(0, 1, 3));
  EXPECT_THAT(r->weights(), ElementsAre(0.5f, -2.0f, 1.25f));
  r = FillCallData(R"({"ids":["1","2","3"],"pooling":"POOLING_MEAN","lengths":[2,"0",1]})", rng);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->pooling(), embedding::v1::POOLING_MEAN);
  EXPECT_THAT(r->lengths(), ElementsAre(2, 0, 1));
  r = FillCallData(R"({"ids":["1"],"pooling":"POOLING_MAX"})", rng);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(FillCallData, RefusesFieldsTheRequestLacks) {
  BenchRng rng(1);
  absl::StatusOr<embedding::v1::LookUpRequest> r = FillCallData(R"({"idz":["1"]})", rng);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("LookUpRequest"));
}

}  // namespace
}  // namespace emb::client::call_data_test
