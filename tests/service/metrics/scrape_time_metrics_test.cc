#include "service/metrics/scrape_time_metrics.h"

#include <unistd.h>

#include <optional>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "prometheus/text_serializer.h"

namespace emb::service {
namespace {

const prometheus::MetricFamily* Find(const std::vector<prometheus::MetricFamily>& families,
                                     const std::string& name) {
  for (const prometheus::MetricFamily& f : families) {
    if (f.name == name) {
      return &f;
    }
  }
  return nullptr;
}

TEST(ScrapeTimeMetrics, ReportsThisProcess) {
  ScrapeTimeMetrics metrics;
  const std::vector<prometheus::MetricFamily> families = metrics.Collect();
  const auto* rss = Find(families, "process_resident_memory_bytes");
  ASSERT_NE(rss, nullptr);
  EXPECT_GT(rss->metric.at(0).gauge.value, 1e6);
  const auto* cpu = Find(families, "process_cpu_seconds_total");
  ASSERT_NE(cpu, nullptr);
  EXPECT_EQ(cpu->type, prometheus::MetricType::Counter);
  EXPECT_GE(cpu->metric.at(0).counter.value, 0);
  const auto* start = Find(families, "process_start_time_seconds");
  ASSERT_NE(start, nullptr);
  const double now = static_cast<double>(time(nullptr));
  EXPECT_LE(start->metric.at(0).gauge.value, now + 1);
  EXPECT_GT(start->metric.at(0).gauge.value, now - 3600);
  const auto* fds = Find(families, "process_open_fds");
  ASSERT_NE(fds, nullptr);
  const int before = static_cast<int>(fds->metric.at(0).gauge.value);
  const int fd = dup(0);
  ASSERT_GE(fd, 0);
  const auto after = metrics.Collect();
  EXPECT_EQ(Find(after, "process_open_fds")->metric.at(0).gauge.value, before + 1);
  close(fd);
  EXPECT_NE(Find(families, "process_max_fds"), nullptr);
  EXPECT_NE(Find(families, "process_virtual_memory_bytes"), nullptr);
}

TEST(ScrapeTimeMetrics, ReadsEachGaugeAtScrapeTimeAndLeavesOutWhatCannotBeRead) {
  ScrapeTimeMetrics metrics;
  double value = 1;
  bool readable = true;
  metrics.AddGauge("test_gauge", "a test", {{"device", "cuda:0"}}, [&]() -> std::optional<double> {
    return readable ? std::optional<double>(value) : std::nullopt;
  });
  metrics.AddGauge("test_gauge", "a test", {{"device", "cuda:1"}},
                   []() -> std::optional<double> { return 7; });
  value = 42;
  auto families = metrics.Collect();
  const auto* g = Find(families, "test_gauge");
  ASSERT_NE(g, nullptr);
  ASSERT_EQ(g->metric.size(), 2u);
  EXPECT_EQ(g->metric[0].gauge.value, 42);
  EXPECT_EQ(g->metric[0].label.at(0).value, "cuda:0");
  EXPECT_EQ(g->metric[1].gauge.value, 7);
  readable = false;
  families = metrics.Collect();
  ASSERT_EQ(Find(families, "test_gauge")->metric.size(), 1u);
  // What the exposer serializes is well formed.
  const std::string text = prometheus::TextSerializer().Serialize(families);
  EXPECT_NE(text.find("test_gauge{device=\"cuda:1\"} 7"), std::string::npos) << text;
}

}  // namespace
}  // namespace emb::service
