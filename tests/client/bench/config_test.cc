#include "client/bench/config.h"

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace emb::client::config_test {
namespace {

TEST(ValidateBenchConfig, AcceptsTheDefaults) { EXPECT_TRUE(ValidateBenchConfig({}).ok()); }

TEST(ValidateBenchConfig, RejectsEachBadField) {
  auto rejects = [](void (*edit)(BenchConfig&)) {
    BenchConfig c;
    edit(c);
    return ValidateBenchConfig(c).code() == absl::StatusCode::kInvalidArgument;
  };
  EXPECT_TRUE(rejects([](BenchConfig& c) { c.connections = 0; }));
  EXPECT_TRUE(rejects([](BenchConfig& c) { c.max_inflight = 0; }));
  EXPECT_TRUE(rejects([](BenchConfig& c) { c.rps = -1; }));
  EXPECT_TRUE(rejects([](BenchConfig& c) { c.requests = -1; }));
  EXPECT_TRUE(rejects([](BenchConfig& c) { c.pool_requests = -1; }));
  EXPECT_TRUE(rejects([](BenchConfig& c) { c.duration = absl::ZeroDuration(); }));
  EXPECT_TRUE(rejects([](BenchConfig& c) { c.warmup = absl::InfiniteDuration(); }));
  EXPECT_TRUE(rejects([](BenchConfig& c) { c.timeout = absl::ZeroDuration(); }));
  EXPECT_TRUE(rejects([](BenchConfig& c) { c.max_recv_message_bytes = 0; }));
  EXPECT_TRUE(rejects([](BenchConfig& c) { c.max_recv_message_bytes = int64_t{1} << 31; }));
}

TEST(ValidateBenchConfig, RequestsMakeTheDurationOptional) {
  BenchConfig c;
  c.duration = absl::ZeroDuration();
  c.requests = 10;
  EXPECT_TRUE(ValidateBenchConfig(c).ok());
}

TEST(ValidateBenchConfig, ReceiveLimitIsUnlimitedOrPositive) {
  BenchConfig c;
  c.max_recv_message_bytes = -1;
  EXPECT_TRUE(ValidateBenchConfig(c).ok());
  c.max_recv_message_bytes = 1;
  EXPECT_TRUE(ValidateBenchConfig(c).ok());
}

}  // namespace
}  // namespace emb::client::config_test
