// Tables larger than the GPU memory they may use (issue 25, the host tier), through the real
// embedding-server binary on loopback: the --table options gpu_budget= and hot_ids= and the flags
// --gpu_memory_budget and --host_tier. On the CPU (here) they are checked and change nothing: the
// answers are those of a server without them, byte for byte, and ListTables says the table is in
// host memory with no host tier. On the GPU (the "gpu." tests, EMB_TEST_DEVICE=cuda:0 through
// scripts/gpu-check) a budget smaller than the table puts it in the host tier: ListTables, the
// start-up log and the cache metrics say so, and the answers are still the same bytes. Bad options
// stop start-up naming the table, the option, the file and the id.
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/embedding_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/data_type.h"
#include "tests/testing/loaded_server.h"
#include "tests/testing/metrics_text.h"
#include "tests/testing/server_process.h"
#include "tests/testing/table_files.h"

namespace emb::host_tier_test {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testing::ServerProcess;

constexpr int64_t kRows = 50000;
constexpr int64_t kDim = 32;
constexpr int64_t kBatch =
    256;  // --max_batch_ids: small batch buffers, so that 1 MiB holds a cache
constexpr absl::Duration kTimeout = absl::Seconds(30);
constexpr DataType kAnswerTypes[] = {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16};

bool OnGpu() { return !ServerProcess::TestOnCpu(); }

// The "stopping: ..." line of a server that failed to start.
std::string StoppingLine(const std::string& log) {
  const size_t at = log.find("stopping: ");
  return at == std::string::npos ? "" : log.substr(at, log.find('\n', at) - at);
}

// Ids drawn as a skewed workload draws them (most from a hot few hundred rows, the rest from
// anywhere), with rows 0 and kRows - 1 and repeats.
std::vector<int64_t> SkewedIds(size_t count, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int64_t> hot(0, 299);
  std::uniform_int_distribution<int64_t> any(0, kRows - 1);
  std::vector<int64_t> ids = {0, kRows - 1, 7, 7};
  while (ids.size() < count) {
    ids.push_back(rng() % 4 == 0 ? any(rng) : hot(rng) * 97 % kRows);
  }
  return ids;
}

class HostTierTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (auto missing = testing::TestDeviceMissing()) {
      GTEST_SKIP() << *missing;
    }
    rows_ = testing::RandomRows(DataType::kFloat32, kRows * kDim, /*seed=*/25);
    table_ = dir_.File("t.npy");
    ASSERT_TRUE(testing::WriteFile(table_, testing::NpyFile("<f4", {kRows, kDim}, rows_)).ok());
    std::vector<int64_t> hot;
    for (int64_t i = 0; i < 300; ++i) {
      hot.push_back(i * 97 % kRows);  // the rows SkewedIds draws most, hottest first
    }
    hot_ids_ = dir_.File("hot.npy");
    ASSERT_TRUE(testing::WriteFile(hot_ids_, testing::IdsNpyFile(hot)).ok());
  }

  // A server of `tables` (--table values) and `flags`, with small batches and no drain.
  static absl::StatusOr<std::unique_ptr<ServerProcess>> Start(
      const std::vector<std::string>& tables, const std::vector<std::string>& flags = {}) {
    return ServerProcess::Start(Args(tables, flags));
  }
  static ServerProcess::Exit RunToExit(const std::vector<std::string>& tables,
                                       const std::vector<std::string>& flags = {}) {
    return ServerProcess::RunToExit(Args(tables, flags));
  }
  static std::vector<std::string> Args(const std::vector<std::string>& tables,
                                       const std::vector<std::string>& flags) {
    std::vector<std::string> args = {"--drain_seconds=0", absl::StrCat("--max_batch_ids=", kBatch),
                                     absl::StrCat("--max_request_ids=", kBatch)};
    for (const std::string& t : tables) {
      args.push_back("--table=" + t);
    }
    args.insert(args.end(), flags.begin(), flags.end());
    return args;
  }

  // The only table that `server` lists.
  static client::TableInfo OnlyTable(const ServerProcess& server) {
    auto tables = client::EmbeddingClient::Connect(server.target())->ListTables(kTimeout);
    EXPECT_TRUE(tables.ok()) << tables.status();
    EXPECT_EQ(tables.ok() ? tables->size() : 0, 1u);
    return tables.ok() && !tables->empty() ? tables->front() : client::TableInfo();
  }

  testing::TempDir dir_;
  std::string rows_;  // the table's float32 rows, as in the file
  std::string table_;
  std::string hot_ids_;
};

TEST_F(HostTierTest, AnswersTheSameBytesAsAServerWithoutTheOptions) {
  auto plain = Start({"t=" + table_});
  ASSERT_TRUE(plain.ok()) << plain.status();
  // A budget smaller than the table's 6.4 MB (on the GPU: the host tier), within a device budget.
  auto tiered =
      Start({"t=" + table_ + ",gpu_budget=1M,hot_ids=" + hot_ids_}, {"--gpu_memory_budget=64M"});
  ASSERT_TRUE(tiered.ok()) << tiered.status();
  auto a = client::EmbeddingClient::Connect((*plain)->target());
  auto b = client::EmbeddingClient::Connect((*tiered)->target());

  int64_t looked_up = 0;
  for (int call = 0; call < 60; ++call) {
    const std::vector<int64_t> ids = SkewedIds(kBatch, /*seed=*/call);
    const DataType type = kAnswerTypes[call % 3];
    auto want = a->LookUp("t", ids, {}, type, kTimeout);
    auto got = b->LookUp("t", ids, {}, type, kTimeout);
    ASSERT_TRUE(want.ok()) << want.status();
    ASSERT_TRUE(got.ok()) << got.status();
    looked_up += static_cast<int64_t>(ids.size());
    EXPECT_TRUE(got->data == want->data) << "call " << call << " (" << DataTypeName(type)
                                         << "): other bytes than the server without options";
    if (type == DataType::kFloat32) {  // and the file's rows themselves
      std::string rows;
      for (int64_t id : ids) {
        rows += rows_.substr(static_cast<size_t>(id * kDim) * 4, kDim * 4);
      }
      EXPECT_TRUE(got->data == rows) << "call " << call << ": not the file's rows";
    }
  }
  // Pooled: sums of bags, from the cache and from host memory alike.
  client::LookUpRequestSpec pooled;
  pooled.table = "t";
  pooled.ids = SkewedIds(200, /*seed=*/99);
  pooled.offsets = {0, 3, 3, 50, 200};
  pooled.pooling = client::Pooling::kSum;
  auto want = a->LookUp(pooled, kTimeout);
  auto got = b->LookUp(pooled, kTimeout);
  ASSERT_TRUE(want.ok()) << want.status();
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->shape, (std::vector<int64_t>{4, kDim}));
  EXPECT_TRUE(got->data == want->data) << "pooled: other bytes than the server without options";
  looked_up += 200;

  const client::TableInfo t = OnlyTable(**tiered);
  EXPECT_EQ(t.rows, kRows);
  EXPECT_EQ(t.device, ServerProcess::TestDevice());
  const std::string log = (*tiered)->log();
  if (!OnGpu()) {
    EXPECT_FALSE(t.host_tier);
    EXPECT_EQ(t.cache_rows, 0);
    EXPECT_EQ(t.device_bytes, 0);
    EXPECT_THAT(log, HasSubstr("table 't': gpu_budget= and hot_ids= are checked but have no effect "
                               "on cpu: the CPU store serves the table from host memory"));
    EXPECT_THAT(log, HasSubstr("--gpu_memory_budget and --host_tier have no effect on cpu"));
    EXPECT_THAT(log, HasSubstr("GB/s, device cpu, in host memory, from "));
    auto metrics = testing::HttpGet((*tiered)->metrics_port(), "/metrics");
    ASSERT_TRUE(metrics.ok()) << metrics.status();
    EXPECT_THAT(*metrics, Not(HasSubstr("embedding_cache_")));
    EXPECT_THAT(*metrics, Not(HasSubstr("embedding_host_read_bytes_total")));
    return;
  }
  // On the GPU: in the host tier, within its budget, with a cache smaller than the table.
  EXPECT_TRUE(t.host_tier);
  EXPECT_GT(t.cache_rows, 0);
  EXPECT_LT(t.cache_rows, kRows);
  EXPECT_GT(t.device_bytes, 0);
  EXPECT_LE(t.device_bytes, int64_t{1} << 20);
  EXPECT_THAT(log, HasSubstr(absl::StrCat(
                       "device cuda:0, in pinned host memory with a GPU cache of ", t.cache_rows,
                       " rows (", t.device_bytes, " bytes of GPU memory)")));
  const client::TableInfo p = OnlyTable(**plain);
  EXPECT_FALSE(p.host_tier);
  EXPECT_EQ(p.cache_rows, 0);
  EXPECT_GE(p.device_bytes, p.bytes);
  EXPECT_THAT((*plain)->log(), HasSubstr("device cuda:0, on the device ("));
  // The cache metrics: every row looked up is a hit or a miss, once its batch has ended.
  const std::string series = "{table=\"t\"}";
  double hits = -1;
  double misses = -1;
  std::string metrics;
  for (const absl::Time until = absl::Now() + kTimeout; absl::Now() < until;
       absl::SleepFor(absl::Milliseconds(20))) {
    auto text = testing::HttpGet((*tiered)->metrics_port(), "/metrics");
    ASSERT_TRUE(text.ok()) << text.status();
    metrics = *text;
    hits = testing::Sample(metrics, "embedding_cache_hits_total" + series);
    misses = testing::Sample(metrics, "embedding_cache_misses_total" + series);
    if (hits + misses >= static_cast<double>(looked_up)) {
      break;
    }
  }
  EXPECT_EQ(hits + misses, static_cast<double>(looked_up)) << metrics;
  EXPECT_GT(hits, 0) << metrics;  // the hot rows were put in the cache at start-up
  EXPECT_EQ(testing::Sample(metrics, "embedding_cache_capacity_rows" + series),
            static_cast<double>(t.cache_rows));
  const double cached = testing::Sample(metrics, "embedding_cache_rows" + series);
  EXPECT_GT(cached, 0);
  EXPECT_LE(cached, static_cast<double>(t.cache_rows));
  EXPECT_EQ(testing::Sample(metrics, "embedding_cache_bytes" + series), cached * kDim * 4);
  EXPECT_EQ(testing::Sample(metrics, "embedding_host_read_bytes_total" + series),
            misses * kDim * 4);
}

// Tables are placed in order within --gpu_memory_budget; without --host_tier a table over its
// budget is refused. On the CPU both are accepted and change nothing.
TEST_F(HostTierTest, TablesShareTheDeviceBudgetInOrder) {
  const std::vector<std::string> two = {"a=" + table_, "b=" + table_};
  if (!OnGpu()) {
    auto server = Start(two, {"--gpu_memory_budget=1M", "--host_tier=false"});
    ASSERT_TRUE(server.ok()) << server.status();
    auto tables = client::EmbeddingClient::Connect((*server)->target())->ListTables(kTimeout);
    ASSERT_TRUE(tables.ok()) << tables.status();
    ASSERT_EQ(tables->size(), 2u);
    for (const client::TableInfo& t : *tables) {
      EXPECT_EQ(t.device, "cpu") << t.name;
      EXPECT_FALSE(t.host_tier) << t.name;
    }
    return;
  }
  // 'a' takes (nearly) all of the 1 MiB in the host tier; 'b' finds too little even for its
  // batch buffers and slot map.
  const ServerProcess::Exit shared = RunToExit(two, {"--gpu_memory_budget=1M"});
  EXPECT_EQ(shared.code, 1) << shared.log;
  EXPECT_THAT(StoppingLine(shared.log), HasSubstr("table 'b' does not fit on cuda:0"));
  EXPECT_THAT(StoppingLine(shared.log), HasSubstr("(--gpu_memory_budget=1048576 left it "));
  EXPECT_THAT(StoppingLine(shared.log), HasSubstr(" after 'a' took "));
  const ServerProcess::Exit refused =
      RunToExit({"t=" + table_ + ",gpu_budget=1M"}, {"--host_tier=false"});
  EXPECT_EQ(refused.code, 1) << refused.log;
  EXPECT_THAT(StoppingLine(refused.log), HasSubstr("table 't' does not fit on cuda:0"));
  EXPECT_THAT(StoppingLine(refused.log), HasSubstr("its GPU budget is 1048576 bytes"));
}

// A table split by rows over two GPU parts is put together on the first device (staging rows and
// batch buffers), which takes from that device's budget as the parts do: a budget one byte short
// of parts and assembly stops start-up naming the assembly; the whole sum starts. GPU only (on the
// CPU the rows are put together in host memory, outside every budget).
TEST_F(HostTierTest, RowSplitAssemblyTakesFromTheDeviceBudget) {
  if (!OnGpu()) {
    GTEST_SKIP() << "the assembly is on a GPU only where every part is";
  }
  const std::vector<std::string> split = {"--device=cuda:0,cuda:0", "--placement=rows",
                                          "--host_tier=false"};
  int64_t total = 0;
  int64_t parts = 0;
  {
    auto server = Start({"t=" + table_}, split);
    ASSERT_TRUE(server.ok()) << server.status();
    auto tables = client::EmbeddingClient::Connect((*server)->target())->ListTables(kTimeout);
    ASSERT_TRUE(tables.ok()) << tables.status();
    ASSERT_EQ(tables->size(), 1u);
    total = tables->front().device_bytes;
    ASSERT_EQ(tables->front().parts.size(), 2u);
    for (const client::TableInfo::Part& part : tables->front().parts) {
      parts += part.device_bytes;
    }
  }
  ASSERT_GT(total, parts) << "the assembly's GPU memory is counted in the table's";
  std::vector<std::string> short_one = split;
  short_one.push_back(absl::StrCat("--gpu_memory_budget=", total - 1));
  const ServerProcess::Exit refused = RunToExit({"t=" + table_}, short_one);
  EXPECT_EQ(refused.code, 1) << refused.log;
  EXPECT_THAT(StoppingLine(refused.log),
              HasSubstr(absl::StrCat("table 't': the row split's assembly needs ", total - parts,
                                     " bytes on cuda:0 but --gpu_memory_budget=", total - 1,
                                     " left it ", total - 1 - parts)));
  std::vector<std::string> exact = split;
  exact.push_back(absl::StrCat("--gpu_memory_budget=", total));
  auto server = Start({"t=" + table_}, exact);
  ASSERT_TRUE(server.ok()) << server.status();
}

TEST_F(HostTierTest, BadHotIdsStopStartUpNamingTheTableTheFileAndTheId) {
  const std::string bad = dir_.File("bad.npy");
  ASSERT_TRUE(testing::WriteFile(bad, testing::IdsNpyFile({1, 2, kRows, 3})).ok());
  ServerProcess::Exit exit = RunToExit({"t=" + table_ + ",hot_ids=" + bad});
  EXPECT_EQ(exit.code, 1) << exit.log;
  EXPECT_THAT(
      StoppingLine(exit.log),
      HasSubstr(absl::StrCat("table 't': hot_ids=", bad, ": id ", kRows,
                             " (at position 2) is out of range for a table of ", kRows, " rows")));
  EXPECT_THAT(exit.log, Not(HasSubstr("listening")));  // checked before any port opens

  const std::string missing = dir_.File("missing.npy");
  exit = RunToExit({"t=" + table_ + ",hot_ids=" + missing});
  EXPECT_EQ(exit.code, 1) << exit.log;
  EXPECT_THAT(StoppingLine(exit.log),
              HasSubstr(absl::StrCat("table 't': hot_ids=", missing, ": cannot open")));

  // Floats are no ids; and a file far larger than the table's ids can be is refused unread.
  const std::string floats = dir_.File("floats.npy");
  ASSERT_TRUE(testing::WriteFile(floats, testing::NpyFile("<f4", {2}, std::string(8, '\0'))).ok());
  exit = RunToExit({"t=" + table_ + ",hot_ids=" + floats});
  EXPECT_EQ(exit.code, 1) << exit.log;
  EXPECT_THAT(StoppingLine(exit.log),
              HasSubstr(absl::StrCat("table 't': hot_ids=", floats, ": unsupported dtype '<f4'")));
  exit = RunToExit({"t=" + table_ + ",hot_ids=" + table_});
  EXPECT_EQ(exit.code, 1) << exit.log;
  EXPECT_THAT(StoppingLine(exit.log),
              HasSubstr(absl::StrCat("table 't': hot_ids=", table_,
                                     ": 6400128 bytes, more than the ids of a table of 50000 rows "
                                     "need")));
}

TEST_F(HostTierTest, BadBudgetsStopStartUpNamingTheOption) {
  const std::pair<std::string, std::string> cases[] = {
      {",gpu_budget=0", "gpu_budget=0: the budget must be more than 0 bytes"},
      {",gpu_budget=abc", "gpu_budget 'abc' is not a size"},
      {",gpu_budget=4GB", "gpu_budget '4GB' is not a size: 'GB' is not a unit"},
      {",gpu_budget=1M,gpu_budget=2M", "gpu_budget= is given twice"},
  };
  for (const auto& [option, message] : cases) {
    const std::string flag = "t=" + table_ + option;
    const ServerProcess::Exit exit = RunToExit({flag});
    EXPECT_EQ(exit.code, 1) << option << "\n" << exit.log;
    EXPECT_THAT(StoppingLine(exit.log), HasSubstr(absl::StrCat("--table=", flag, ": ", message)))
        << exit.log;
  }
  const ServerProcess::Exit exit = RunToExit({"t=" + table_}, {"--gpu_memory_budget=lots"});
  EXPECT_EQ(exit.code, 1) << exit.log;
  EXPECT_THAT(StoppingLine(exit.log), HasSubstr("--gpu_memory_budget: 'lots' is not a size"));
}

// An option that --table does not know is part of the path, as any comma is: the missing file's
// error says that it may be a misspelt option.
TEST_F(HostTierTest, AMisspeltOptionIsNamedWhenTheFileIsMissing) {
  const ServerProcess::Exit exit = RunToExit({"t=" + table_ + ",gpu_bugdet=1M"});
  EXPECT_EQ(exit.code, 1) << exit.log;
  EXPECT_THAT(StoppingLine(exit.log), HasSubstr(table_ + ",gpu_bugdet=1M: cannot open"));
  EXPECT_THAT(StoppingLine(exit.log),
              HasSubstr("is ',gpu_bugdet=' meant as an option? --table takes quantize=, "
                        "gpu_budget=, hot_ids=, shard=, placement= and devices="));
}

}  // namespace
}  // namespace emb::host_tier_test
