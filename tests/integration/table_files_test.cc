// Integration tests of table files: .npy and .safetensors tables served with their rows.
#include "tests/testing/table_files.h"

#include <signal.h>

#include <atomic>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <regex>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/synchronization/blocking_counter.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "client/bench.h"
#include "client/embedding_client.h"
#include "gmock/gmock.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "kernels/cpu_gather.h"
#include "service/common/log.h"
#include "tests/testing/demo_table.h"
#include "tests/testing/server_process.h"

namespace emb::table_files_test {
namespace {

using ::testing::HasSubstr;
using testing::ServerProcess;

constexpr absl::Duration kTimeout = absl::Seconds(30);

// Tables from files: a float16 .npy and a bfloat16 tensor picked out of a .safetensors file,
// the second made the default; rows checked against the files' bytes in every answer type.
TEST(ServerTables, FileTablesServeTheirRowsAndTheChosenDefault) {
  testing::TempDir dir;
  const std::string words = testing::RandomRows(DataType::kFloat16, 700 * 24, 1);
  const std::string items = testing::RandomRows(DataType::kBFloat16, 300 * 40, 2);
  const std::string other = testing::RandomRows(DataType::kFloat32, 5 * 3, 3);
  ASSERT_TRUE(
      testing::WriteFile(dir.File("words.npy"), testing::NpyFile("<f2", {700, 24}, words)).ok());
  ASSERT_TRUE(testing::WriteFile(dir.File("model.safetensors"),
                                 testing::SafetensorsFile({{"other", "F32", {5, 3}, other},
                                                           {"items", "BF16", {300, 40}, items}}))
                  .ok());
  auto server = ServerProcess::Start({"--table=words=" + dir.File("words.npy"),
                                      "--table=items=" + dir.File("model.safetensors") + "#items",
                                      "--default_table=items"});
  ASSERT_TRUE(server.ok()) << server.status();
  auto client = client::EmbeddingClient::Connect((*server)->target());

  auto tables = client->ListTables(kTimeout);
  ASSERT_TRUE(tables.ok()) << tables.status();
  ASSERT_EQ(tables->size(), 2u);
  EXPECT_EQ((*tables)[0].name, "items");
  EXPECT_TRUE((*tables)[0].is_default);
  EXPECT_EQ((*tables)[0].dtype, DataType::kBFloat16);
  EXPECT_EQ((*tables)[0].rows, 300);
  EXPECT_EQ((*tables)[0].dim, 40);
  EXPECT_EQ((*tables)[1].name, "words");
  EXPECT_FALSE((*tables)[1].is_default);
  EXPECT_EQ((*tables)[1].dtype, DataType::kFloat16);

  std::mt19937_64 rng(4);
  struct Case {
    std::string table;  // as requested; "" is the default, items
    const std::string* data;
    DataType type;
    int64_t rows, dim;
  };
  for (const Case& c : {Case{"words", &words, DataType::kFloat16, 700, 24},
                        Case{"", &items, DataType::kBFloat16, 300, 40}}) {
    std::vector<int64_t> ids(50);
    for (int64_t& id : ids) {
      id = static_cast<int64_t>(rng() % c.rows);
    }
    ids[0] = c.rows - 1;
    for (DataType out : {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16}) {
      auto r = client->LookUp(c.table, ids, {}, out, kTimeout);
      ASSERT_TRUE(r.ok()) << r.status();
      std::string want(ids.size() * c.dim * ElementSize(out), '\0');
      kernels::CpuGather(reinterpret_cast<const std::byte*>(c.data->data()), c.type, c.dim, ids,
                         out, reinterpret_cast<std::byte*>(want.data()));
      EXPECT_TRUE(r->data == want) << "table '" << c.table << "' as " << DataTypeName(out);
    }
  }
  EXPECT_THAT((*server)->log(), HasSubstr("table 'words' loaded: 700 rows x 24 dims, float16"));
  EXPECT_THAT((*server)->log(), HasSubstr("table 'items' loaded: 300 rows x 40 dims, bfloat16"));
}

// --table flags in a --flagfile (as the Kubernetes manifests pass them, from a ConfigMap) count
// like those on the command line, together with them: Abseil alone would keep only the last.
TEST(ServerTables, TablesInAFlagfileAreServedWithThoseOnTheCommandLine) {
  testing::TempDir dir;
  const std::string a = testing::RandomRows(DataType::kFloat32, 40 * 8, 5);
  const std::string b = testing::RandomRows(DataType::kFloat32, 30 * 4, 6);
  ASSERT_TRUE(testing::WriteFile(dir.File("a.npy"), testing::NpyFile("<f4", {40, 8}, a)).ok());
  ASSERT_TRUE(testing::WriteFile(dir.File("b.npy"), testing::NpyFile("<f4", {30, 4}, b)).ok());
  ASSERT_TRUE(testing::WriteFile(dir.File("tables.flags"),
                                 "# tables\n--table=a=" + dir.File("a.npy") + "\n\n")
                  .ok());
  auto server = ServerProcess::Start(
      {"--flagfile=" + dir.File("tables.flags"), "--table=b=" + dir.File("b.npy")});
  ASSERT_TRUE(server.ok()) << server.status();
  auto client = client::EmbeddingClient::Connect((*server)->target());
  for (const auto& [name, data, dim] :
       {std::tuple<std::string, const std::string*, int64_t>{"a", &a, 8}, {"b", &b, 4}}) {
    const std::vector<int64_t> ids = {3, 0, 29, 3};
    auto r = client->LookUp(name, ids, {}, DataType::kFloat32, kTimeout);
    ASSERT_TRUE(r.ok()) << name << ": " << r.status();
    std::string want(ids.size() * dim * 4, '\0');
    kernels::CpuGather(reinterpret_cast<const std::byte*>(data->data()), DataType::kFloat32, dim,
                       ids, DataType::kFloat32, reinterpret_cast<std::byte*>(want.data()));
    EXPECT_TRUE(r->data == want) << "table " << name;
  }
}

}  // namespace
}  // namespace emb::table_files_test
