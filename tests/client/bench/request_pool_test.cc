#include "client/bench/request_pool.h"

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "client/bench/ghz_config.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace emb::client::request_pool_test {
namespace {

namespace pb = ::embedding::v1;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

TEST(RequestPoolSize, CoversAtLeast64KiIdsWithin16To4096Requests) {
  EXPECT_EQ(RequestPoolSize(1), 4096);
  EXPECT_EQ(RequestPoolSize(16), 4096);
  EXPECT_EQ(RequestPoolSize(256), 256);
  EXPECT_EQ(RequestPoolSize(2048), 32);
  EXPECT_EQ(RequestPoolSize(65536), 16);
  EXPECT_EQ(RequestPoolSize(1 << 20), 8);  // at most 2^23 ids
  EXPECT_EQ(RequestPoolSize(1 << 24), 1);
}

TEST(MakeRequestPool, SampledIdsInRangeWithTableAndDtype) {
  BenchConfig c;
  c.ids_per_request = 300;
  c.table = "t";
  c.dtype = DataType::kFloat16;
  absl::StatusOr<std::vector<pb::LookUpRequest>> pool = MakeRequestPool(c, 50);
  ASSERT_TRUE(pool.ok()) << pool.status();
  ASSERT_EQ(static_cast<int64_t>(pool->size()), RequestPoolSize(300));
  for (const pb::LookUpRequest& r : *pool) {
    ASSERT_EQ(r.ids_size(), 300);
    EXPECT_EQ(r.table(), "t");
    EXPECT_EQ(r.dtype(), pb::DATA_TYPE_FLOAT16);
    for (int64_t id : r.ids()) {
      ASSERT_GE(id, 0);
      ASSERT_LT(id, 50);
    }
  }
}

TEST(MakeRequestPool, PoolRequestsSetsHowManyEachFreshlyDrawn) {
  BenchConfig c;
  c.ids_per_request = 64;
  c.pool_requests = RequestPoolSize(64) + 3;
  c.distribution = IdDistribution::kZipf;
  c.zipf_exponent = 1.05;
  absl::StatusOr<std::vector<pb::LookUpRequest>> pool = MakeRequestPool(c, 1 << 20);
  ASSERT_TRUE(pool.ok()) << pool.status();
  ASSERT_EQ(static_cast<int64_t>(pool->size()), c.pool_requests);
  for (size_t i = 0; i < pool->size(); ++i) {
    ASSERT_EQ((*pool)[i].ids_size(), 64);
    for (int64_t id : (*pool)[i].ids()) {
      ASSERT_GE(id, 0);
      ASSERT_LT(id, 1 << 20);
    }
    if (i > 0) {  // each request its own draw, not a copy of another
      EXPECT_NE((*pool)[i].SerializeAsString(), (*pool)[i - 1].SerializeAsString());
    }
  }
}

TEST(MakeRequestPool, SameSeedSamePool) {
  BenchConfig c;
  c.seed = 9;
  const std::vector<pb::LookUpRequest> a = *MakeRequestPool(c, 1000);
  const std::vector<pb::LookUpRequest> b = *MakeRequestPool(c, 1000);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].SerializeAsString(), b[i].SerializeAsString());
  }
}

TEST(MakeRequestPool, CallDataMessagesInTurnWithTheirOwnDtype) {
  BenchConfig c;
  c.call_data = {
      R"({"ids":["{{randomInt 0 5}}","{{randomInt 5 10}}"],"dtype":"DATA_TYPE_BFLOAT16"})",
      R"({"ids":["{{randomInt 100 200}}","7"],"shape":[1,2],"table":"other"})"};
  absl::StatusOr<std::vector<pb::LookUpRequest>> pool = MakeRequestPool(c, /*num_rows=*/1);
  ASSERT_TRUE(pool.ok()) << pool.status();
  ASSERT_EQ(pool->size(), 4096u);  // RequestPoolSize(2), a multiple of the 2 messages
  for (size_t i = 0; i < pool->size(); ++i) {
    const pb::LookUpRequest& r = (*pool)[i];
    ASSERT_EQ(r.ids_size(), 2);
    if (i % 2 == 0) {
      EXPECT_LT(r.ids(0), 5);
      EXPECT_GE(r.ids(1), 5);
      EXPECT_EQ(r.dtype(), pb::DATA_TYPE_BFLOAT16);
      EXPECT_EQ(r.table(), "");
    } else {
      EXPECT_GE(r.ids(0), 100);
      EXPECT_EQ(r.ids(1), 7);
      EXPECT_EQ(r.shape_size(), 2);
      EXPECT_EQ(r.table(), "other");
    }
  }
}

TEST(MakeRequestPool, TableAndDtypeGivenOverrideTheCallData) {
  BenchConfig c;
  c.call_data = {R"({"ids":["1"],"table":"a","dtype":"DATA_TYPE_BFLOAT16"})"};
  c.table = "b";
  c.dtype = DataType::kFloat32;
  const std::vector<pb::LookUpRequest> pool = *MakeRequestPool(c, 1);
  EXPECT_EQ(pool.front().table(), "b");
  EXPECT_EQ(pool.front().dtype(), pb::DATA_TYPE_FLOAT32);
}

// A ghz config's pooled call data (deploy/loadtest/ style) reaches every request as written.
TEST(MakeRequestPool, PooledCallDataFromAGhzConfig) {
  absl::StatusOr<GhzConfig> file = ParseGhzConfig(R"({
    "call": "embedding.v1.EmbeddingService.LookUp", "insecure": true, "total": 10,
    "data": {"ids": ["{{randomInt 0 50}}", "{{randomInt 0 50}}", "{{randomInt 0 50}}"],
             "pooling": "POOLING_SUM", "offsets": [0, 2, 3], "weights": [0.5, 1, 2]}})");
  ASSERT_TRUE(file.ok()) << file.status();
  BenchConfig c;
  ASSERT_TRUE(ApplyGhzConfig(*file, {}, &c).ok());
  absl::StatusOr<std::vector<pb::LookUpRequest>> pool = MakeRequestPool(c, 50);
  ASSERT_TRUE(pool.ok()) << pool.status();
  ASSERT_FALSE(pool->empty());
  for (const pb::LookUpRequest& r : *pool) {
    ASSERT_EQ(r.ids_size(), 3);
    EXPECT_EQ(r.pooling(), pb::POOLING_SUM);
    EXPECT_THAT(r.offsets(), ElementsAre(0, 2, 3));
    EXPECT_THAT(r.weights(), ElementsAre(0.5f, 1.0f, 2.0f));
    EXPECT_THAT(r.lengths(), IsEmpty());
  }
}

TEST(MakeRequestPool, BadCallDataIsInvalidArgument) {
  BenchConfig c;
  c.call_data = {R"({"ids":["{{randomString 4}}"]})"};
  EXPECT_EQ(MakeRequestPool(c, 1).status().code(), absl::StatusCode::kInvalidArgument);
  c.call_data = {R"({"ids":"seven"})"};
  EXPECT_EQ(MakeRequestPool(c, 1).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace emb::client::request_pool_test
