// The set-up and ending shared by the tests that load a real server with many callers
// (stress_test, large_answer_test): a demo-table server on the test device, one client per
// connection, and the check that the server is healthy after the load and exits cleanly.
#ifndef EMB_TESTS_TESTING_LOADED_SERVER_H_
#define EMB_TESTS_TESTING_LOADED_SERVER_H_

#include <signal.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "client/embedding_client.h"
#include "gtest/gtest.h"
#include "tests/testing/server_process.h"

namespace emb::testing {

// Why a test of the server on EMB_TEST_DEVICE cannot run here (a GPU device but none visible), or
// nothing when it can.
inline std::optional<std::string> TestDeviceMissing() {
  if (ServerProcess::TestOnCpu() || std::filesystem::exists("/dev/nvidia0")) {
    return std::nullopt;
  }
  return absl::StrCat("EMB_TEST_DEVICE=", ServerProcess::TestDevice(), " but no GPU is visible");
}

// A server of a rows x dim demo table made from `seed`, with no drain at shutdown, plus `flags`.
inline absl::StatusOr<std::unique_ptr<ServerProcess>> StartDemoServer(
    int64_t rows, int64_t dim, uint64_t seed, const std::vector<std::string>& flags) {
  std::vector<std::string> all = {
      absl::StrCat("--demo_table=", rows, "x", dim),
      absl::StrCat("--demo_seed=", seed),
      "--drain_seconds=0",
  };
  all.insert(all.end(), flags.begin(), flags.end());
  return ServerProcess::Start(all);
}

// `connections` clients of `server`, each on its own connection.
inline std::vector<std::unique_ptr<client::EmbeddingClient>> ClientsOnOwnConnections(
    const ServerProcess& server, int connections) {
  std::vector<std::unique_ptr<client::EmbeddingClient>> clients;
  for (int c = 0; c < connections; ++c) {
    clients.push_back(std::make_unique<client::EmbeddingClient>(
        client::CreateInsecureChannel(server.target(), /*connection_id=*/c)));
  }
  return clients;
}

// After the load: every client finds the server SERVING, and SIGTERM ends it with status 0. Also
// keeps the clients alive well past their last callbacks: destroying them at once races, in gRPC
// 1.51's client, the teardown of the last call on the callback thread (seen as a double free in
// grpc_cq_internal_unref, 1 run in 13 on 2 loaded cores).
inline void ExpectHealthyThenCleanExit(
    ServerProcess& server, const std::vector<std::unique_ptr<client::EmbeddingClient>>& clients) {
  for (const auto& client : clients) {
    auto health = client->CheckHealth("", absl::Seconds(30));
    ASSERT_TRUE(health.ok()) << health.status() << "\n" << server.log();
    EXPECT_EQ(*health, "SERVING");
  }
  server.Signal(SIGTERM);
  EXPECT_EQ(server.WaitExit(absl::Seconds(60)), 0) << server.log();
}

}  // namespace emb::testing

#endif  // EMB_TESTS_TESTING_LOADED_SERVER_H_
