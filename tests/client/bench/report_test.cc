#include "client/bench/report.h"

#include <string>

#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace emb::client::report_test {
namespace {

using ::testing::HasSubstr;

TEST(FormatBenchJson, HasEveryKey) {
  BenchReport r;
  r.table = "t\"1";
  r.rows = 10;
  r.dim = 4;
  r.requests = 200;
  r.duration_s = 2;
  r.ok_ids = 3200;
  r.payload_bytes = 4000000;
  r.latency.p50 = absl::Microseconds(100);
  r.latency.p999 = absl::Microseconds(1500);
  r.codes["OK"] = 199;
  r.codes["UNAVAILABLE"] = 1;
  const std::string json = FormatBenchJson(r);
  EXPECT_THAT(json, HasSubstr("\"requests\":200,"));
  EXPECT_THAT(json, HasSubstr("\"duration_s\":2.000000,"));
  EXPECT_THAT(json, HasSubstr("\"rps\":100.000,"));
  EXPECT_THAT(json, HasSubstr("\"ids_per_s\":1600.000,"));
  EXPECT_THAT(json, HasSubstr("\"payload_mb_per_s\":2.000000,"));
  EXPECT_THAT(json, HasSubstr("\"latency_us\":{\"p50\":100.000,"));
  EXPECT_THAT(json, HasSubstr("\"p999\":1500.000,"));
  EXPECT_THAT(json, HasSubstr("\"codes\":{\"OK\":199,\"UNAVAILABLE\":1}"));
  EXPECT_THAT(json, HasSubstr("\"first_messages\":{},"));
  EXPECT_THAT(json, HasSubstr("\"table\":\"t\\\"1\""));
  EXPECT_EQ(json.front(), '{');
  EXPECT_EQ(json.back(), '}');
}

// Issue 40: each failing code comes with the message of one of its calls, as ghz shows them.
TEST(FormatBenchJson, GivesAFirstMessageOfEachFailingCode) {
  BenchReport r;
  r.codes["OK"] = 1;
  r.codes["INVALID_ARGUMENT"] = 514;
  r.codes["OUT_OF_RANGE"] = 200;
  r.first_messages["INVALID_ARGUMENT"] = "ids[3] = -1 is negative";
  r.first_messages["OUT_OF_RANGE"] = "ids[0] = 100 is \"out\" of range";
  EXPECT_THAT(FormatBenchJson(r),
              HasSubstr("\"codes\":{\"INVALID_ARGUMENT\":514,\"OK\":1,\"OUT_OF_RANGE\":200},"
                        "\"first_messages\":{\"INVALID_ARGUMENT\":\"ids[3] = -1 is negative\","
                        "\"OUT_OF_RANGE\":\"ids[0] = 100 is \\\"out\\\" of range\"},"));
  const std::string text = FormatBenchText(BenchConfig(), r);
  EXPECT_THAT(text, HasSubstr("codes         INVALID_ARGUMENT 514 OK 1 OUT_OF_RANGE 200\n"
                              "  INVALID_ARGUMENT: ids[3] = -1 is negative\n"
                              "  OUT_OF_RANGE: ids[0] = 100 is \"out\" of range\n"));
}

TEST(FormatBenchText, NamesTheLoadAndTheIdSource) {
  BenchConfig c;
  c.target = "h:1";
  c.concurrency = 3;
  BenchReport r;
  r.table = "demo";
  r.codes["OK"] = 5;
  EXPECT_THAT(FormatBenchText(c, r), HasSubstr("16 ids/request, uniform ids"));
  EXPECT_THAT(FormatBenchText(c, r), HasSubstr("closed loop, concurrency 3"));
  EXPECT_THAT(FormatBenchText(c, r), HasSubstr("codes         OK 5"));
  c.call_data = {"{}"};
  c.rps = 50;
  EXPECT_THAT(FormatBenchText(c, r), HasSubstr("requests from ghz data"));
  EXPECT_THAT(FormatBenchText(c, r), HasSubstr("open loop at 50 req/s"));
}

}  // namespace
}  // namespace emb::client::report_test
