#include "service/metrics/metrics.h"

#include <algorithm>
#include <string>

#include "gtest/gtest.h"
#include "prometheus/text_serializer.h"

namespace emb::service::metrics_test {
namespace {

TEST(Metrics, StageBucketsResolveMicrosecondsAndKeepEveryCoarseBound) {
  const auto& stage = Metrics::StageSecondsBuckets();
  EXPECT_EQ(stage.front(), 1e-6);
  EXPECT_EQ(stage.back(), 10);
  EXPECT_TRUE(std::is_sorted(stage.begin(), stage.end()));
  EXPECT_EQ(std::adjacent_find(stage.begin(), stage.end()), stage.end());
  // A rule or panel written for the coarse buckets finds its `le` in the fine ones.
  for (double bound : Metrics::SecondsBuckets()) {
    EXPECT_NE(std::find(stage.begin(), stage.end(), bound), stage.end()) << bound;
  }
  // From 4 to 15 us (the H200's small gathers), no step wider than 25%.
  for (size_t i = 1; i < stage.size() && stage[i] <= 1.5e-5; ++i) {
    if (stage[i - 1] >= 4e-6) {
      EXPECT_LE(stage[i] / stage[i - 1], 1.25 + 1e-9) << stage[i];
    }
  }
}

// The gauges that say what the alerts would otherwise have to guess: health, and per table its
// queue's limit and the memory it takes.
TEST(Metrics, ExportsHealthQueueLimitAndTableBytes) {
  Metrics metrics;
  TableMetrics table = metrics.AddTable("items", "float32", "cuda:0", 1000, 16, 64000);
  table.queue_limit_ids->Set(1048576);
  table.device_bytes->Set(70000);
  metrics.health_status().Set(1);
  const std::string text = prometheus::TextSerializer().Serialize(metrics.registry()->Collect());
  for (const std::string line : {
           "embedding_health_status 1",
           "embedding_queue_limit_ids{table=\"items\"} 1048576",
           "embedding_table_bytes{table=\"items\"} 64000",
           "embedding_table_device_bytes{table=\"items\"} 70000",
           "# TYPE embedding_health_status gauge",
           "# TYPE embedding_queue_limit_ids gauge",
           "# TYPE embedding_table_device_bytes gauge",
       }) {
    EXPECT_NE(text.find("\n" + line + "\n"), std::string::npos) << line << "\n" << text;
  }
}

}  // namespace
}  // namespace emb::service::metrics_test
