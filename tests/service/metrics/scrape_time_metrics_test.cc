#include "service/metrics/scrape_time_metrics.h"

#include <unistd.h>

#include <optional>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "prometheus/text_serializer.h"

namespace emb::service::scrape_time_metrics_test {
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

TEST(ScrapeTimeMetrics, AGroupIsReadOncePerScrapeAndItsCountersNeverGoDown) {
  ScrapeTimeMetrics metrics;
  std::optional<std::vector<double>> values = std::vector<double>{10, 5};
  int reads = 0;
  metrics.AddGroup({{"test_things_total", "things", prometheus::MetricType::Counter},
                    {"test_level", "a level", prometheus::MetricType::Gauge}},
                   {{"table", "t"}}, [&] {
                     ++reads;
                     return values;
                   });
  auto families = metrics.Collect();
  EXPECT_EQ(reads, 1);
  const auto* things = Find(families, "test_things_total");
  ASSERT_NE(things, nullptr);
  EXPECT_EQ(things->type, prometheus::MetricType::Counter);
  ASSERT_EQ(things->metric.size(), 1u);
  EXPECT_EQ(things->metric[0].counter.value, 10);
  EXPECT_EQ(things->metric[0].label.at(0).name, "table");
  EXPECT_EQ(things->metric[0].label.at(0).value, "t");
  EXPECT_EQ(Find(families, "test_level")->metric.at(0).gauge.value, 5);

  values = std::vector<double>{7, 2};  // the source went back: the counter stays, the gauge not
  families = metrics.Collect();
  EXPECT_EQ(Find(families, "test_things_total")->metric.at(0).counter.value, 10);
  EXPECT_EQ(Find(families, "test_level")->metric.at(0).gauge.value, 2);
  values = std::vector<double>{12, 3};
  families = metrics.Collect();
  EXPECT_EQ(Find(families, "test_things_total")->metric.at(0).counter.value, 12);

  values = std::nullopt;  // unreadable: the whole group is left out
  families = metrics.Collect();
  EXPECT_EQ(Find(families, "test_things_total"), nullptr);
  EXPECT_EQ(Find(families, "test_level"), nullptr);
  values = std::vector<double>{1};  // not one value per sample: left out too
  EXPECT_EQ(Find(metrics.Collect(), "test_level"), nullptr);
  values = std::vector<double>{13, 4};
  families = metrics.Collect();
  EXPECT_EQ(Find(families, "test_things_total")->metric.at(0).counter.value, 13);
  EXPECT_EQ(reads, 6);
  const std::string text = prometheus::TextSerializer().Serialize(families);
  EXPECT_NE(text.find("# TYPE test_things_total counter"), std::string::npos) << text;
  EXPECT_NE(text.find("test_things_total{table=\"t\"} 13"), std::string::npos) << text;
}

TEST(ScrapeTimeMetrics, GroupsOfOneFamilyShareIt) {
  ScrapeTimeMetrics metrics;
  for (const char* table : {"a", "b"}) {
    metrics.AddGroup({{"test_rows", "rows", prometheus::MetricType::Gauge}}, {{"table", table}},
                     [table] { return std::vector<double>{table[0] == 'a' ? 1.0 : 2.0}; });
  }
  const auto families = metrics.Collect();
  const auto* rows = Find(families, "test_rows");
  ASSERT_NE(rows, nullptr);
  ASSERT_EQ(rows->metric.size(), 2u);
  EXPECT_EQ(rows->metric[0].label.at(0).value, "a");
  EXPECT_EQ(rows->metric[0].gauge.value, 1);
  EXPECT_EQ(rows->metric[1].label.at(0).value, "b");
  EXPECT_EQ(rows->metric[1].gauge.value, 2);
}

}  // namespace
}  // namespace emb::service::scrape_time_metrics_test
