#include "client/bench.h"

#include <string>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace emb::client::bench_test {
namespace {

TEST(RunBench, RejectsMoreBlockingSlotsThanThreadsItWouldStart) {
  BenchConfig config;
  config.target = "127.0.0.1:1";  // never reached: the config is checked first
  config.blocking = true;
  config.concurrency = kMaxBlockingSlots + 1;
  const absl::Status s = RunBench(config).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), ::testing::HasSubstr("limit of 1024"));
}

TEST(RunBench, RejectsBadConfigBeforeConnecting) {
  BenchConfig config;
  config.target = "127.0.0.1:1";
  config.concurrency = 0;
  EXPECT_EQ(RunBench(config).status().code(), absl::StatusCode::kInvalidArgument);
  config.concurrency = 1;
  config.ids_per_request = 0;
  EXPECT_EQ(RunBench(config).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace emb::client::bench_test
