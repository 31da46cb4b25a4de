// The host tier's cache metrics against a store double that reports CacheStats (no GPU here: the
// GPU store's own figures are tested in tests/service/store/gpu/).
#include "service/server/cache_metrics.h"

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"
#include "prometheus/text_serializer.h"

namespace emb::service::cache_metrics_test {
namespace {

// A store whose table is (or is not) in a host tier, with the cache figures a test sets.
class CacheStatsStore final : public EmbeddingStore {
 public:
  CacheStatsStore(const std::string& name, bool host_tier)
      : EmbeddingStore(TableInfo{name, 1000, 8, DataType::kFloat32, "cuda:0"}, 64) {
    set_placement(host_tier, host_tier ? 100 : 0, 1 << 20);
  }
  void Set(const std::optional<CacheStats>& stats) {
    absl::MutexLock lock(&mu_);
    stats_ = stats;
  }
  std::optional<CacheStats> cache_stats() const override {
    absl::MutexLock lock(&mu_);
    return stats_;
  }
  void LookUp(const LookUpBatch& batch, Done done) override {
    (void)batch;
    done(absl::UnimplementedError("no lookups here"), StageTimes{});
  }

 private:
  mutable absl::Mutex mu_;
  std::optional<CacheStats> stats_ ABSL_GUARDED_BY(mu_);
};

CacheStats Stats(int64_t lookups, int64_t misses, int64_t cached_rows) {
  CacheStats s;
  s.capacity_rows = 100;
  s.cached_rows = cached_rows;
  s.row_bytes = 32;
  s.lookups = lookups;
  s.misses = misses;
  return s;
}

// The value of family `name`'s sample labelled table=`table`; nullopt where there is none.
std::optional<double> Value(const std::vector<prometheus::MetricFamily>& families,
                            const std::string& name, const std::string& table) {
  for (const prometheus::MetricFamily& f : families) {
    if (f.name != name) {
      continue;
    }
    for (const prometheus::ClientMetric& m : f.metric) {
      if (m.label.size() == 1 && m.label[0].name == "table" && m.label[0].value == table) {
        return f.type == prometheus::MetricType::Counter ? m.counter.value : m.gauge.value;
      }
    }
  }
  return std::nullopt;
}

const char* const kNames[] = {"embedding_cache_hits_total", "embedding_cache_misses_total",
                              "embedding_cache_rows",       "embedding_cache_capacity_rows",
                              "embedding_cache_bytes",      "embedding_host_read_bytes_total"};

TEST(CacheMetrics, ReportsTheCacheOfAHostTierTable) {
  CacheStatsStore store("big", /*host_tier=*/true);
  store.Set(Stats(/*lookups=*/1000, /*misses=*/250, /*cached_rows=*/90));
  ScrapeTimeMetrics metrics;
  AddCacheMetrics(store, metrics);
  const std::vector<prometheus::MetricFamily> families = metrics.Collect();
  EXPECT_EQ(Value(families, "embedding_cache_hits_total", "big"), 750);
  EXPECT_EQ(Value(families, "embedding_cache_misses_total", "big"), 250);
  EXPECT_EQ(Value(families, "embedding_cache_rows", "big"), 90);
  EXPECT_EQ(Value(families, "embedding_cache_capacity_rows", "big"), 100);
  EXPECT_EQ(Value(families, "embedding_cache_bytes", "big"), 90 * 32);
  EXPECT_EQ(Value(families, "embedding_host_read_bytes_total", "big"), 250 * 32);
  for (const prometheus::MetricFamily& f : families) {
    const bool counter = f.name.size() > 6 && f.name.substr(f.name.size() - 6) == "_total";
    if (f.name.rfind("embedding_", 0) == 0) {
      EXPECT_EQ(f.type, counter ? prometheus::MetricType::Counter : prometheus::MetricType::Gauge)
          << f.name;
      EXPECT_FALSE(f.help.empty()) << f.name;
    }
  }
  const std::string text = prometheus::TextSerializer().Serialize(families);
  EXPECT_NE(text.find("embedding_cache_hits_total{table=\"big\"} 750"), std::string::npos) << text;
  EXPECT_NE(text.find("# TYPE embedding_cache_misses_total counter"), std::string::npos) << text;
}

TEST(CacheMetrics, NothingForATableOnTheDevice) {
  CacheStatsStore store("small", /*host_tier=*/false);
  store.Set(Stats(10, 1, 1));  // even where a store reported figures
  ScrapeTimeMetrics metrics;
  AddCacheMetrics(store, metrics);
  const std::vector<prometheus::MetricFamily> families = metrics.Collect();
  for (const char* name : kNames) {
    EXPECT_EQ(Value(families, name, "small"), std::nullopt) << name;
  }
}

// Misses are counted as rows are read, lookups as batches end: a scrape in the middle of a batch
// sees misses ahead of lookups, and fewer hits than the scrape before. The hits counter stays
// where it was until the lookups catch up; the gauges follow the figures as they are.
TEST(CacheMetrics, CountersNeverGoDown) {
  CacheStatsStore store("big", /*host_tier=*/true);
  ScrapeTimeMetrics metrics;
  AddCacheMetrics(store, metrics);
  store.Set(Stats(/*lookups=*/100, /*misses=*/30, /*cached_rows=*/50));
  EXPECT_EQ(Value(metrics.Collect(), "embedding_cache_hits_total", "big"), 70);
  store.Set(Stats(100, 45, 40));  // a batch in flight: 15 misses counted, its lookups not yet
  auto families = metrics.Collect();
  EXPECT_EQ(Value(families, "embedding_cache_hits_total", "big"), 70);
  EXPECT_EQ(Value(families, "embedding_cache_misses_total", "big"), 45);
  EXPECT_EQ(Value(families, "embedding_host_read_bytes_total", "big"), 45 * 32);
  EXPECT_EQ(Value(families, "embedding_cache_rows", "big"), 40);  // a gauge goes down
  store.Set(Stats(10, 45, 40));  // misses past the lookups: the hits never go negative
  EXPECT_EQ(Value(metrics.Collect(), "embedding_cache_hits_total", "big"), 70);
  store.Set(Stats(200, 45, 40));  // the batch ended
  EXPECT_EQ(Value(metrics.Collect(), "embedding_cache_hits_total", "big"), 155);
}

TEST(CacheMetrics, AStoreWithoutFiguresIsLeftOutOfTheScrape) {
  CacheStatsStore store("big", /*host_tier=*/true);
  CacheStatsStore other("other", /*host_tier=*/true);
  other.Set(Stats(5, 1, 1));
  ScrapeTimeMetrics metrics;
  AddCacheMetrics(store, metrics);
  AddCacheMetrics(other, metrics);
  auto families = metrics.Collect();
  for (const char* name : kNames) {
    EXPECT_EQ(Value(families, name, "big"), std::nullopt) << name;
  }
  EXPECT_EQ(Value(families, "embedding_cache_hits_total", "other"), 4);
  store.Set(Stats(8, 2, 3));
  families = metrics.Collect();
  EXPECT_EQ(Value(families, "embedding_cache_hits_total", "big"), 6);
  EXPECT_EQ(Value(families, "embedding_cache_hits_total", "other"), 4);
}

}  // namespace
}  // namespace emb::service::cache_metrics_test
