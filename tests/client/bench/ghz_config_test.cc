#include "client/bench/ghz_config.h"

#include <set>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace emb::client::ghz_config_test {
namespace {

using ::testing::HasSubstr;

constexpr char kMinimal[] =
    R"({"call":"embedding.v1.EmbeddingService/LookUp","data":{"ids":["{{randomInt 0 9}}"]}})";

TEST(ParseGhzConfig, AbsentKeysHoldGhzDefaults) {
  absl::StatusOr<GhzConfig> c = ParseGhzConfig(kMinimal);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->total, 200);
  EXPECT_EQ(c->concurrency, 50);
  EXPECT_EQ(c->connections, 1);
  EXPECT_EQ(c->rps, 0);
  EXPECT_EQ(c->timeout, absl::Seconds(20));
  EXPECT_EQ(c->max_recv_message_bytes, -1);  // ghz 0.121.0 sets no receive limit
  EXPECT_FALSE(c->insecure);
  ASSERT_EQ(c->data.size(), 1u);
  EXPECT_THAT(c->data[0], HasSubstr("{{randomInt 0 9}}"));
}

TEST(ParseGhzConfig, ReadsEveryLoadKey) {
  absl::StatusOr<GhzConfig> c = ParseGhzConfig(R"({
      "call": "embedding.v1.EmbeddingService.LookUp", "host": "h:1", "insecure": true,
      "total": 7, "concurrency": 3, "connections": 2, "rps": 100, "duration": "1m30s",
      "timeout": "250ms", "max-recv-message-size": "64MiB", "name": "ignored",
      "data": [{"ids": ["1"]}, {"ids": ["2"], "dtype": "DATA_TYPE_FLOAT16"}]})");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->call, kLookUpCall);
  EXPECT_EQ(c->host, "h:1");
  EXPECT_TRUE(c->insecure);
  EXPECT_EQ(c->total, 7);
  EXPECT_EQ(c->concurrency, 3);
  EXPECT_EQ(c->connections, 2);
  EXPECT_EQ(c->rps, 100);
  EXPECT_EQ(c->duration, absl::Seconds(90));
  EXPECT_EQ(c->timeout, absl::Milliseconds(250));
  EXPECT_EQ(c->max_recv_message_bytes, 64 << 20);
  EXPECT_EQ(c->data.size(), 2u);
}

TEST(ParseGhzConfig, RefusesWhatBenchCannotReproduce) {
  const std::string call = R"("call":"embedding.v1.EmbeddingService/LookUp","data":{"ids":[]})";
  for (const std::string& extra :
       {std::string(R"("async":true)"), std::string(R"("load-schedule":"step")"),
        std::string(R"("data-file":"x.json")"), std::string(R"("max-duration":"1s")"),
        std::string(R"("concurency":5)"), std::string(R"("total":"5")"),
        std::string(R"("duration":30)"), std::string(R"("concurrency":0)")}) {
    absl::StatusOr<GhzConfig> c = ParseGhzConfig("{" + call + "," + extra + "}");
    EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument) << extra;
  }
  EXPECT_THAT(std::string(ParseGhzConfig(R"({"call":"x.Y/Z","data":{}})").status().message()),
              HasSubstr("LookUp"));
  EXPECT_EQ(ParseGhzConfig(R"({"call":"embedding.v1.EmbeddingService/LookUp"})").status().code(),
            absl::StatusCode::kInvalidArgument);  // no data
  EXPECT_EQ(ParseGhzConfig(R"({"data": {"ids": [{{randomInt 0 9}}]}})").status().code(),
            absl::StatusCode::kInvalidArgument);  // a bare template is not JSON, as in ghz
}

TEST(ParseByteSize, KnowsGhzUnits) {
  EXPECT_EQ(*ParseByteSize("4194304"), 4194304);
  EXPECT_EQ(*ParseByteSize("64MB"), 64000000);
  EXPECT_EQ(*ParseByteSize("64 MiB"), 64 << 20);
  EXPECT_EQ(*ParseByteSize("1.5kb"), 1500);
  EXPECT_EQ(*ParseByteSize("2GiB"), int64_t{2} << 30);
  EXPECT_EQ(ParseByteSize("64 parsecs").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseByteSize("").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseByteSize("0").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ApplyGhzConfig, FileSetsTheLoadWithGhzSemantics) {
  GhzConfig file = *ParseGhzConfig(kMinimal);
  file.host = "h:1";
  file.insecure = true;
  file.concurrency = 8;
  file.rps = 100;
  file.total = 30;
  BenchConfig c;
  ASSERT_TRUE(ApplyGhzConfig(file, {}, &c).ok());
  EXPECT_EQ(c.target, "h:1");
  EXPECT_EQ(c.concurrency, 8);
  EXPECT_EQ(c.max_inflight, 8);  // a ghz worker makes one call at a time
  EXPECT_EQ(c.rps, 100);
  EXPECT_EQ(c.requests, 30);
  EXPECT_EQ(c.warmup, absl::ZeroDuration());
  EXPECT_EQ(c.timeout, absl::Seconds(20));
  EXPECT_EQ(c.max_recv_message_bytes, -1);  // none, as in ghz 0.121.0
  EXPECT_FALSE(c.tls.has_value());
  EXPECT_EQ(c.call_data, file.data);

  file.duration = absl::Seconds(5);  // -z: n is ignored
  ASSERT_TRUE(ApplyGhzConfig(file, {}, &c).ok());
  EXPECT_EQ(c.requests, 0);
  EXPECT_EQ(c.duration, absl::Seconds(5));
}

TEST(ApplyGhzConfig, FlagsGivenOverrideTheFile) {
  GhzConfig file = *ParseGhzConfig(kMinimal);
  file.host = "h:1";
  file.insecure = true;
  BenchConfig c;
  c.target = "flag:2";
  c.concurrency = 1;  // the flag's default value, given explicitly
  c.requests = 9;
  c.warmup = absl::Seconds(1);
  c.max_recv_message_bytes = 100;
  ASSERT_TRUE(
      ApplyGhzConfig(file, {"target", "concurrency", "requests", "warmup", "max_recv_message_size"},
                     &c)
          .ok());
  EXPECT_EQ(c.target, "flag:2");
  EXPECT_EQ(c.concurrency, 1);
  EXPECT_EQ(c.requests, 9);
  EXPECT_EQ(c.warmup, absl::Seconds(1));
  EXPECT_EQ(c.max_recv_message_bytes, 100);
}

TEST(ApplyGhzConfig, WithoutInsecureSpeaksTlsAsGhzDoes) {
  GhzConfig file = *ParseGhzConfig(kMinimal);
  file.cname = "embeddings.internal";
  BenchConfig c;
  ASSERT_TRUE(ApplyGhzConfig(file, {}, &c).ok());
  ASSERT_TRUE(c.tls.has_value());
  EXPECT_EQ(c.tls->server_name, "embeddings.internal");
  EXPECT_TRUE(c.tls->root_certs.empty());  // gRPC's default roots
  file.cacert = "/nonexistent/ca.pem";
  EXPECT_EQ(ApplyGhzConfig(file, {}, &c).code(), absl::StatusCode::kInvalidArgument);
}

TEST(ApplyGhzConfig, IdFlagsConflictWithTheCallData) {
  GhzConfig file = *ParseGhzConfig(kMinimal);
  BenchConfig c;
  const absl::Status s = ApplyGhzConfig(file, {"ids_per_request", "zipf_exponent"}, &c);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("--ids_per_request, --zipf_exponent"));
}

}  // namespace
}  // namespace emb::client::ghz_config_test
