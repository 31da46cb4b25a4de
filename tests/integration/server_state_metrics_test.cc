// What the server says of its own state in /metrics, which the alerts and the dashboard read
// (issue 26): its health (embedding_health_status), its device (embedding_device_lost), and per
// table the queue's limit (embedding_queue_limit_ids) and the memory the table takes
// (embedding_table_bytes, embedding_table_device_bytes), through the real embedding-server binary
// on loopback, against its flags, ListTables and its health service. On the CPU here and on
// cuda:0 through scripts/gpu-check. A lost device cannot be caused here: DeviceLossMetrics' unit
// test covers what the server does then.
#include <signal.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "client/embedding_client.h"
#include "gtest/gtest.h"
#include "kernels/data_type.h"
#include "tests/testing/loaded_server.h"
#include "tests/testing/metrics_text.h"
#include "tests/testing/server_process.h"
#include "tests/testing/table_files.h"

namespace emb::server_state_metrics_test {
namespace {

using testing::ServerProcess;

constexpr absl::Duration kTimeout = absl::Seconds(30);

std::string Scrape(const ServerProcess& server) {
  absl::StatusOr<std::string> text = testing::HttpGet(server.metrics_port(), "/metrics");
  EXPECT_TRUE(text.ok()) << text.status();
  return text.ok() ? *text : "";
}

class ServerStateMetricsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (auto missing = testing::TestDeviceMissing()) {
      GTEST_SKIP() << *missing;
    }
  }
};

// Per table, the queue's limit is --max_queue_ids and the bytes are ListTables' (a float32
// table, and one quantized to int8 whose bytes are not rows x dim x 4); the device is not lost.
TEST_F(ServerStateMetricsTest, TablesQueueLimitAndDeviceAreTheServersOwn) {
  testing::TempDir dir;
  const std::string file = dir.File("t.npy");
  ASSERT_TRUE(testing::WriteFile(
                  file, testing::NpyFile("<f4", {3000, 24},
                                         testing::RandomRows(DataType::kFloat32, 3000 * 24, 26)))
                  .ok());
  auto server =
      ServerProcess::Start({"--table=plain=" + file, "--table=small=" + file + ",quantize=int8",
                            "--max_queue_ids=123456", "--drain_seconds=0"});
  ASSERT_TRUE(server.ok()) << server.status();
  auto tables = client::EmbeddingClient::Connect((*server)->target())->ListTables(kTimeout);
  ASSERT_TRUE(tables.ok()) << tables.status();
  ASSERT_EQ(tables->size(), 2u);
  const std::string metrics = Scrape(**server);
  for (const client::TableInfo& t : *tables) {
    SCOPED_TRACE(t.name);
    const std::string series = absl::StrCat("{table=\"", t.name, "\"} ");
    EXPECT_EQ(testing::Sample(metrics, "embedding_queue_limit_ids" + series), 123456);
    EXPECT_EQ(testing::Sample(metrics, "embedding_table_bytes" + series),
              static_cast<double>(t.bytes));
    EXPECT_EQ(testing::Sample(metrics, "embedding_table_device_bytes" + series),
              static_cast<double>(t.device_bytes));
    if (t.device == "cpu") {
      EXPECT_EQ(t.device_bytes, 0);
    } else {
      EXPECT_GT(t.device_bytes, 0);
    }
  }
  EXPECT_EQ(tables->at(0).bytes, 3000 * 24 * 4);
  EXPECT_EQ(tables->at(1).bytes, 3000 * (24 + 8));  // int8 rows with a float scale and bias
  const std::string device = tables->front().device;
  EXPECT_EQ(testing::Sample(metrics, "embedding_device_lost{device=\"" + device + "\"} "), 0)
      << metrics;
  EXPECT_EQ(metrics.find("embedding_device_lost_error_info"), std::string::npos);
  EXPECT_EQ(testing::Sample(metrics, "embedding_health_status "), 1) << metrics;
}

// Health is 1 while serving and 0 from the stop signal on, while the server still serves through
// its drain, as the health service says.
TEST_F(ServerStateMetricsTest, HealthIsOneWhileServingAndZeroWhileDraining) {
  auto server = testing::StartDemoServer(1000, 8, 1, {"--drain_seconds=5"});
  ASSERT_TRUE(server.ok()) << server.status();
  auto client = client::EmbeddingClient::Connect((*server)->target());
  auto health = client->CheckHealth("", kTimeout);
  ASSERT_TRUE(health.ok()) << health.status();
  EXPECT_EQ(*health, "SERVING");
  EXPECT_EQ(testing::Sample(Scrape(**server), "embedding_health_status "), 1);

  (*server)->Signal(SIGTERM);
  // The server sets health NOT_SERVING before it logs so.
  ASSERT_TRUE((*server)->WaitForLog("received SIGTERM", kTimeout)) << (*server)->log();
  const std::string draining = Scrape(**server);
  health = client->CheckHealth("", kTimeout);
  ASSERT_TRUE(health.ok()) << health.status();
  EXPECT_EQ(*health, "NOT_SERVING");
  EXPECT_EQ(testing::Sample(draining, "embedding_health_status "), 0) << draining;
  auto rows = client->LookUp("", {1, 2}, {}, std::nullopt, kTimeout);  // still served
  EXPECT_TRUE(rows.ok()) << rows.status();
  EXPECT_EQ((*server)->WaitExit(absl::Seconds(60)), 0) << (*server)->log();
}

}  // namespace
}  // namespace emb::server_state_metrics_test
