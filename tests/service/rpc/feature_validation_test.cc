#include "service/rpc/feature_validation.h"

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "embedding/v1/embedding_service.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/data_type.h"
#include "tests/testing/status_matchers.h"

namespace emb::service::feature_validation_test {
namespace {

using ::emb::testing::StatusIs;
using ::embedding::v1::Feature;
using ::embedding::v1::LookUpFeaturesRequest;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// The default table first, then a wider one, and a shard.
const RequestTable kTables[] = {
    {"users", RowRange::Whole(10), 4, DataType::kFloat32},
    {"items", RowRange::Whole(20), 8, DataType::kFloat16},
    {"shard", RowRange(10, 10, 30), 2, DataType::kFloat32, 1, 3},
};
constexpr FeatureLimits kLimits{
    .max_features = 4, .max_call_ids = 50, .max_feature_ids = 20, .max_response_bytes = 4096};

Feature MakeFeature(const std::string& table, std::initializer_list<int64_t> ids,
                    std::initializer_list<int64_t> lengths,
                    embedding::v1::Pooling pooling = embedding::v1::POOLING_SUM) {
  Feature f;
  f.set_name(table + "_f");
  f.set_table(table);
  f.mutable_ids()->Add(ids.begin(), ids.end());
  f.mutable_lengths()->Add(lengths.begin(), lengths.end());
  f.set_pooling(pooling);
  return f;
}

LookUpFeaturesRequest Call(int64_t batch, std::vector<Feature> features) {
  LookUpFeaturesRequest r;
  r.set_batch_size(batch);
  for (Feature& f : features) {
    *r.add_features() = std::move(f);
  }
  return r;
}

TEST(PlanFeatures, LaysOutPooledFeaturesSideBySideAndUnpooledOnesApart) {
  LookUpFeaturesRequest r =
      Call(2, {MakeFeature("items", {1, 2, 3}, {2, 1}),
               MakeFeature("", {4, 5, 6, 7}, {1, 3}, embedding::v1::POOLING_UNSPECIFIED),
               MakeFeature("users", {9, 0}, {}, embedding::v1::POOLING_MEAN)});
  FeatureReject reject;
  absl::StatusOr<FeaturesPlan> plan = PlanFeatures(r, kTables, kLimits, &reject);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->out_type, DataType::kFloat32);
  EXPECT_EQ(plan->batch_size, 2);
  EXPECT_EQ(plan->ids, 9);
  EXPECT_EQ(plan->pooled_width, 8 + 4);  // items, then users; the unpooled feature takes none
  ASSERT_EQ(plan->features.size(), 3u);
  const PlannedFeature& items = plan->features[0];
  EXPECT_EQ(items.table, 1u);
  EXPECT_EQ(items.pooled_column, 0);
  EXPECT_THAT(items.plan.offsets, ElementsAre(0, 2, 3));
  EXPECT_THAT(items.lookup.ids(), ElementsAre(1, 2, 3));  // moved out of the request
  EXPECT_TRUE(r.features(0).ids().empty());
  const PlannedFeature& plain = plan->features[1];
  EXPECT_EQ(plain.table, 0u);  // no table: the default
  EXPECT_FALSE(plain.plan.pooled);
  EXPECT_EQ(plain.plan.answer_rows, 4);
  const PlannedFeature& mean = plan->features[2];
  EXPECT_TRUE(mean.plan.mean);
  EXPECT_EQ(mean.pooled_column, 8);
  EXPECT_EQ(mean.plan.answer_rows, 2);  // one id a sample, without lengths
  // float32: the pooled rows (2 x 12) and the unpooled rows (4 x 4).
  EXPECT_EQ(plan->answer_bytes, (2 * 12 + 4 * 4) * 4u);
}

TEST(PlanFeatures, RefusesNamingTheFeatureTableAndLimitWithTheReasonCounted) {
  struct Case {
    LookUpFeaturesRequest request;
    absl::StatusCode code;
    std::string words;
    absl::string_view reason;
    size_t table;
  };
  LookUpFeaturesRequest wrong_dtype = Call(1, {MakeFeature("users", {1}, {})});
  wrong_dtype.set_dtype(embedding::v1::DATA_TYPE_INT8_ROWWISE);
  const std::vector<Case> cases = {
      {Call(1, {}), absl::StatusCode::kInvalidArgument, "no features", kRejectBadShape, 0},
      {Call(0, {MakeFeature("users", {}, {})}), absl::StatusCode::kInvalidArgument,
       "batch_size is 0", kRejectBadShape, 0},
      {Call(1, std::vector<Feature>(5, MakeFeature("users", {1}, {}))),
       absl::StatusCode::kInvalidArgument, "5 features exceed the limit of 4", kRejectTooManyIds,
       0},
      {Call(1, {MakeFeature("users", {1}, {}), MakeFeature("nope", {1}, {})}),
       absl::StatusCode::kNotFound, "feature 1 'nope_f', table 'nope': unknown table",
       absl::string_view(), 0},
      {Call(2, {MakeFeature("items", {1, 2, 3}, {1, 1})}), absl::StatusCode::kInvalidArgument,
       "feature 0 'items_f', table 'items': lengths sum to 2 but ids has 3", kRejectBadBags, 1},
      {Call(3, {MakeFeature("items", {1, 2, 3}, {1, 2})}), absl::StatusCode::kInvalidArgument,
       "lengths has 2 values; give one per sample (batch_size 3)", kRejectBadBags, 1},
      {Call(1, {MakeFeature("items", {20}, {})}), absl::StatusCode::kOutOfRange,
       "feature 0 'items_f', table 'items': ids[0] = 20 is out of range", kRejectOutOfRange, 1},
      {Call(1, {MakeFeature("shard", {3}, {})}), absl::StatusCode::kOutOfRange,
       "outside shard 1/3 of table 'shard'", kRejectOutOfRange, 2},
      {Call(1, {MakeFeature("users", {1, 2}, {})}), absl::StatusCode::kInvalidArgument,
       "one id per sample, but ids has 2 for batch_size 1", kRejectBadBags, 0},
      {wrong_dtype, absl::StatusCode::kInvalidArgument, "is not an answer type", kRejectBadDtype,
       0},
  };
  for (const Case& c : cases) {
    LookUpFeaturesRequest r = c.request;
    FeatureReject reject;
    EXPECT_THAT(PlanFeatures(r, kTables, kLimits, &reject).status(),
                StatusIs(c.code, HasSubstr(c.words)));
    EXPECT_EQ(reject.reason, c.reason) << c.words;
    EXPECT_EQ(reject.table, c.table) << c.words;
  }
}

TEST(PlanFeatures, HoldsTheCallToItsIdsAndTheAnswerToItsBytes) {
  // 3 features of 20 ids: each within its own limit, 60 over the call's 50.
  Feature twenty = MakeFeature("users", {}, {20});
  twenty.mutable_ids()->Resize(20, 1);
  LookUpFeaturesRequest r = Call(1, {twenty, twenty, twenty});
  FeatureReject reject;
  EXPECT_THAT(PlanFeatures(r, kTables, kLimits, &reject).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("60 ids in all features exceed the limit of 50 ids per call "
                                 "(--max_feature_call_ids)")));
  EXPECT_EQ(reject.ids, 60);
  // 4 unpooled features of 10 rows of items (dim 8) in float32: 320 bytes each, 1280 in all.
  Feature rows = MakeFeature("items", {}, {}, embedding::v1::POOLING_UNSPECIFIED);
  rows.mutable_ids()->Resize(10, 1);
  rows.mutable_lengths()->Add(10);
  r = Call(1, {rows, rows, rows, rows});
  EXPECT_TRUE(PlanFeatures(r, kTables, kLimits, &reject).ok());
  FeatureLimits tight = kLimits;
  tight.max_response_bytes = 1000;
  r = Call(1, {rows, rows, rows, rows});
  EXPECT_THAT(PlanFeatures(r, kTables, tight, &reject).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("over 1000 bytes (--max_response_bytes) by feature 3 'items_f'")));
  EXPECT_EQ(reject.reason, kRejectAnswerTooLarge);
}

}  // namespace
}  // namespace emb::service::feature_validation_test
