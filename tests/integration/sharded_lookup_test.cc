// A table row-sharded over servers (issue 26), through the real embedding-server binary on
// loopback: servers started with --shard=K/N hold one block of rows each, and ShardedClient over
// them answers exactly as one server holding the whole table, for every table type and answer
// type; a shard refuses other shards' ids naming its range; a shard that is down fails the call
// naming it, never with a partial answer; and with one of a shard's two replicas down, calls keep
// succeeding (gRPC's round_robin and its retry of UNAVAILABLE).
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "client/embedding_client.h"
#include "client/sharded_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/data_type.h"
#include "tests/testing/loaded_server.h"
#include "tests/testing/server_process.h"
#include "tests/testing/table_files.h"

namespace emb::sharded_lookup_test {
namespace {

using ::testing::HasSubstr;
using testing::ServerProcess;

constexpr int kShards = 3;
constexpr int64_t kRows = 1001;  // blocks of 334, 334 and 333 rows
constexpr int64_t kDim = 24;
constexpr absl::Duration kTimeout = absl::Seconds(30);
constexpr DataType kAnswerTypes[] = {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16};

// Random ids of the whole table with every block's first and last row among them, and repeats.
std::vector<int64_t> Ids(size_t count, int64_t rows, uint64_t seed) {
  const int64_t block = (rows + kShards - 1) / kShards;
  std::vector<int64_t> ids;
  for (int k = 0; k < kShards; ++k) {
    ids.push_back(k * block);
    ids.push_back(std::min(rows, (k + 1) * block) - 1);
  }
  ids.push_back(ids.back());
  std::mt19937_64 rng(seed);
  while (ids.size() < count) {
    ids.push_back(static_cast<int64_t>(rng() % static_cast<uint64_t>(rows)));
  }
  return ids;
}

std::vector<std::string> Targets(const std::vector<std::unique_ptr<ServerProcess>>& shards) {
  std::vector<std::string> targets;
  for (const auto& s : shards) {
    targets.push_back(s->target());
  }
  return targets;
}

// Four tables (float32, float16, bfloat16 and int8 row-wise quantized from float32), one server
// with all of each and kShards servers with a block each; shared by the tests that leave them
// running.
class ShardedLookupTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new testing::TempDir();
    const std::string f32 = testing::RandomRows(DataType::kFloat32, kRows * kDim, 1);
    const std::string f16 = testing::RandomRows(DataType::kFloat16, kRows * kDim, 2);
    const std::string bf16 = testing::RandomRows(DataType::kBFloat16, kRows * kDim, 3);
    ASSERT_TRUE(
        testing::WriteFile(dir_->File("f32.npy"), testing::NpyFile("<f4", {kRows, kDim}, f32))
            .ok());
    ASSERT_TRUE(
        testing::WriteFile(dir_->File("f16.npy"), testing::NpyFile("<f2", {kRows, kDim}, f16))
            .ok());
    ASSERT_TRUE(testing::WriteFile(dir_->File("bf16.safetensors"),
                                   testing::SafetensorsFile({{"w", "BF16", {kRows, kDim}, bf16}}))
                    .ok());
    const std::vector<std::string> tables = {
        "--table=f32=" + dir_->File("f32.npy"), "--table=f16=" + dir_->File("f16.npy"),
        "--table=bf16=" + dir_->File("bf16.safetensors"),
        "--table=int8=" + dir_->File("f32.npy") + ",quantize=int8"};
    whole_ = Start(tables).release();
    shards_ = new std::vector<std::unique_ptr<ServerProcess>>();
    for (int k = 0; k < kShards; ++k) {
      std::vector<std::string> args = tables;
      args.push_back(absl::StrCat("--shard=", k, "/", kShards));
      shards_->push_back(Start(args));
    }
  }
  static void TearDownTestSuite() {
    delete shards_;
    delete whole_;
    delete dir_;
  }

  static std::unique_ptr<ServerProcess> Start(std::vector<std::string> args) {
    args.push_back("--drain_seconds=0");
    auto server = ServerProcess::Start(std::move(args));
    EXPECT_TRUE(server.ok()) << server.status();
    return server.ok() ? *std::move(server) : nullptr;
  }

  void SetUp() override {
    if (auto missing = testing::TestDeviceMissing()) {
      GTEST_SKIP() << *missing;
    }
    ASSERT_NE(whole_, nullptr);
    for (const auto& s : *shards_) {
      ASSERT_NE(s, nullptr);
    }
  }

  static testing::TempDir* dir_;
  static ServerProcess* whole_;
  static std::vector<std::unique_ptr<ServerProcess>>* shards_;
};

testing::TempDir* ShardedLookupTest::dir_ = nullptr;
ServerProcess* ShardedLookupTest::whole_ = nullptr;
std::vector<std::unique_ptr<ServerProcess>>* ShardedLookupTest::shards_ = nullptr;

TEST_F(ShardedLookupTest, ShardsAnswerExactlyAsTheWholeTable) {
  auto whole = client::EmbeddingClient::Connect(whole_->target());
  auto sharded = client::ShardedClient::Connect(Targets(*shards_));
  ASSERT_TRUE(sharded.ok()) << sharded.status();
  uint64_t seed = 0;
  for (const char* table : {"f32", "f16", "bf16", "int8"}) {
    for (const DataType type : kAnswerTypes) {
      SCOPED_TRACE(absl::StrCat(table, " as ", DataTypeName(type)));
      client::LookUpRequestSpec spec;
      spec.table = table;
      spec.ids = Ids(300, kRows, ++seed);
      spec.shape = {20, 15};
      spec.dtype = type;
      auto want = whole->LookUp(spec, kTimeout);
      auto got = (*sharded)->LookUp(spec, kTimeout);
      ASSERT_TRUE(want.ok()) << want.status();
      ASSERT_TRUE(got.ok()) << got.status();
      EXPECT_EQ(got->shape, (std::vector<int64_t>{20, 15, kDim}));
      EXPECT_EQ(got->dtype, type);
      ASSERT_EQ(got->data.size(), want->data.size());
      for (size_t i = 0; i < spec.ids.size(); ++i) {  // row by row, to name the id
        const size_t row = want->data.size() / spec.ids.size();
        ASSERT_EQ(got->data.substr(i * row, row), want->data.substr(i * row, row))
            << "row of ids[" << i << "] = " << spec.ids[i];
      }
    }
  }
  // The default table (f32: the first --table), by an empty name; ids of one shard only.
  client::LookUpRequestSpec spec;
  spec.ids = {400, 500, 600};
  auto want = whole->LookUp(spec, kTimeout);
  auto got = (*sharded)->LookUp(spec, kTimeout);
  ASSERT_TRUE(want.ok()) << want.status();
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->data, want->data);
  EXPECT_EQ(got->shape, (std::vector<int64_t>{3, kDim}));
}

TEST_F(ShardedLookupTest, ListTablesReportsTheShardAndTheWholeTable) {
  auto tables = client::EmbeddingClient::Connect((*shards_)[2]->target())->ListTables(kTimeout);
  ASSERT_TRUE(tables.ok()) << tables.status();
  ASSERT_EQ(tables->size(), 4u);
  for (const client::TableInfo& t : *tables) {
    SCOPED_TRACE(t.name);
    EXPECT_EQ(t.shard_index, 2);
    EXPECT_EQ(t.shard_count, kShards);
    EXPECT_EQ(t.first_row, 668);
    EXPECT_EQ(t.rows, 333);
    EXPECT_EQ(t.whole_rows, kRows);
  }
  auto whole = client::EmbeddingClient::Connect(whole_->target())->ListTables(kTimeout);
  ASSERT_TRUE(whole.ok()) << whole.status();
  EXPECT_EQ(whole->front().shard_count, 0);
  EXPECT_EQ(whole->front().whole_rows, kRows);
  EXPECT_THAT((*shards_)[2]->log(), HasSubstr("(shard 2/3: rows 668..1000 of 1001)"));
}

TEST_F(ShardedLookupTest, AShardRefusesOtherShardsIdsNamingItsRows) {
  auto shard = client::EmbeddingClient::Connect((*shards_)[1]->target());
  for (const int64_t id : {int64_t{333}, int64_t{668}, kRows}) {
    auto got = shard->LookUp("f32", {400, id}, {}, std::nullopt, kTimeout);
    ASSERT_FALSE(got.ok()) << id;
    EXPECT_EQ(got.status().code(), absl::StatusCode::kOutOfRange);
    EXPECT_THAT(got.status().message(),
                HasSubstr(absl::StrCat("ids[1] = ", id,
                                       " is outside shard 1/3 of table 'f32', "
                                       "which holds rows 334..667 of 1001")));
  }
  auto negative = shard->LookUp("f32", {-1}, {}, std::nullopt, kTimeout);
  EXPECT_EQ(negative.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(ShardedLookupTest, TheClientRefusesWhatNoShardHolds) {
  auto sharded = client::ShardedClient::Connect(Targets(*shards_));
  ASSERT_TRUE(sharded.ok()) << sharded.status();
  client::LookUpRequestSpec spec;
  spec.table = "f16";
  spec.ids = {5, kRows};
  auto got = (*sharded)->LookUp(spec, kTimeout);
  EXPECT_EQ(got.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(got.status().message(),
              HasSubstr("ids[1] = 1001 is out of range for table 'f16' with 1001 rows over 3"));
  spec.ids = {5, -1};  // as a server answers it (issue 40)
  got = (*sharded)->LookUp(spec, kTimeout);
  EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(got.status().message(), HasSubstr("ids[1] = -1 is negative"));
  spec.ids = {1};
  spec.pooling = client::Pooling::kSum;
  EXPECT_EQ((*sharded)->LookUp(spec, kTimeout).status().code(), absl::StatusCode::kUnimplemented);
  spec.pooling = client::Pooling::kNone;
  spec.table = "nope";
  got = (*sharded)->LookUp(spec, kTimeout);
  EXPECT_EQ(got.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(got.status().message(), HasSubstr("shard 0 of 3"));
  // The shards out of order: shard 1 is not shard 0.
  auto swapped = client::ShardedClient::Connect(
      {(*shards_)[1]->target(), (*shards_)[0]->target(), (*shards_)[2]->target()});
  ASSERT_TRUE(swapped.ok());
  spec.table = "f32";
  got = (*swapped)->LookUp(spec, kTimeout);
  EXPECT_EQ(got.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(got.status().message(), HasSubstr("is shard 1 of 3, not shard 0 of 3"));
}

// Servers of the seeded demo table: each shard makes only its rows, the same as the whole one's.
std::unique_ptr<ServerProcess> StartDemo(const std::string& shard) {
  std::vector<std::string> args = {"--demo_table=1000x8", "--drain_seconds=0"};
  if (!shard.empty()) {
    args.push_back("--shard=" + shard);
  }
  auto server = ServerProcess::Start(args);
  EXPECT_TRUE(server.ok()) << server.status();
  return server.ok() ? *std::move(server) : nullptr;
}

TEST(ShardFailureTest, AShardDownFailsTheCallNamingItButOtherShardsStillServe) {
  if (auto missing = testing::TestDeviceMissing()) {
    GTEST_SKIP() << *missing;
  }
  std::vector<std::unique_ptr<ServerProcess>> shards;
  for (int k = 0; k < kShards; ++k) {
    shards.push_back(StartDemo(absl::StrCat(k, "/", kShards)));
    ASSERT_NE(shards.back(), nullptr);
  }
  auto sharded = client::ShardedClient::Connect(Targets(shards));
  ASSERT_TRUE(sharded.ok());
  client::LookUpRequestSpec spec;
  spec.ids = {0, 500, 999};                              // one id on each shard
  ASSERT_TRUE((*sharded)->LookUp(spec, kTimeout).ok());  // learns the split

  const std::string down = shards[1]->target();
  shards[1].reset();  // SIGKILL
  auto got = (*sharded)->LookUp(spec, kTimeout);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(got.status().message(), HasSubstr(absl::StrCat("shard 1 of 3 (", down, ")")));
  // Ids of the other shards only: no call to shard 1.
  spec.ids = {0, 999};
  EXPECT_TRUE((*sharded)->LookUp(spec, kTimeout).ok());
}

TEST(ShardFailureTest, WithOneOfTwoReplicasDownCallsKeepSucceeding) {
  if (auto missing = testing::TestDeviceMissing()) {
    GTEST_SKIP() << *missing;
  }
  auto whole = StartDemo("");
  auto replica_a = StartDemo("0/2");
  auto replica_b = StartDemo("0/2");
  auto shard_1 = StartDemo("1/2");
  ASSERT_TRUE(whole && replica_a && replica_b && shard_1);
  // Shard 0's two replicas behind one target, as a headless Service's name resolves to both.
  auto sharded =
      client::ShardedClient::Connect({absl::StrCat("ipv4:127.0.0.1:", replica_a->grpc_port(),
                                                   ",127.0.0.1:", replica_b->grpc_port()),
                                      shard_1->target()});
  ASSERT_TRUE(sharded.ok());
  auto reference = client::EmbeddingClient::Connect(whole->target());
  auto check = [&](int calls, uint64_t seed) {
    for (int c = 0; c < calls; ++c) {
      client::LookUpRequestSpec spec;
      spec.ids = Ids(64, 1000, seed + static_cast<uint64_t>(c));
      auto want = reference->LookUp(spec, kTimeout);
      auto got = (*sharded)->LookUp(spec, kTimeout);
      ASSERT_TRUE(want.ok()) << want.status();
      ASSERT_TRUE(got.ok()) << "call " << c << ": " << got.status();
      ASSERT_EQ(got->data, want->data) << "call " << c;
    }
  };
  check(20, 100);
  replica_a.reset();  // SIGKILL: its calls in flight and its connection fail UNAVAILABLE
  check(60, 200);
}

// Shards of the same shape that serve different versions (issue 41, item 7e): the sharded client
// refuses to mix their rows, naming both versions; shards on one version answer.
TEST(ShardVersionTest, ShardsServingDifferentVersionsAreRefused) {
  if (auto missing = testing::TestDeviceMissing()) {
    GTEST_SKIP() << *missing;
  }
  testing::TempDir dir;
  // A: versions 1 and 2 (another content, the same shape); B: version 1 only.
  for (const auto& [path, seed] : {std::pair<std::string, int>{"a/1", 1}, {"a/2", 2}, {"b/1", 1}}) {
    const std::string d = dir.File(path);
    ASSERT_TRUE(std::filesystem::create_directories(d)) << d;
    ASSERT_TRUE(
        testing::WriteFile(
            d + "/t.npy",
            testing::NpyFile("<f4", {100, 4}, testing::RandomRows(DataType::kFloat32, 400, seed)))
            .ok());
  }
  auto start = [&](const std::string& versions, int k) {
    auto server = ServerProcess::Start({"--table=t=" + dir.File(versions), "--drain_seconds=0",
                                        absl::StrCat("--shard=", k, "/2")});
    EXPECT_TRUE(server.ok()) << server.status();
    return server.ok() ? *std::move(server) : nullptr;
  };
  auto a0 = start("a", 0);  // version 2
  auto b0 = start("b", 0);  // version 1
  auto b1 = start("b", 1);  // version 1
  ASSERT_TRUE(a0 && b0 && b1);
  client::LookUpRequestSpec spec;
  spec.ids = {0, 99};  // one id on each shard
  auto mixed = client::ShardedClient::Connect({a0->target(), b1->target()});
  ASSERT_TRUE(mixed.ok());
  auto got = (*mixed)->LookUp(spec, kTimeout);
  EXPECT_EQ(got.status().code(), absl::StatusCode::kFailedPrecondition) << got.status();
  EXPECT_THAT(got.status().message(),
              HasSubstr("shard 1 of 2 (" + b1->target() +
                        "): table 't' there is version 1, but on shard 0 version 2"));
  auto same = client::ShardedClient::Connect({b0->target(), b1->target()});
  ASSERT_TRUE(same.ok());
  got = (*same)->LookUp(spec, kTimeout);
  ASSERT_TRUE(got.ok()) << got.status();
  auto layout = (*same)->Layout("t", kTimeout);
  ASSERT_TRUE(layout.ok());
  EXPECT_EQ(layout->version, 1);
}

}  // namespace
}  // namespace emb::sharded_lookup_test
