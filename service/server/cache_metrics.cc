#include "service/server/cache_metrics.h"

#include <algorithm>
#include <optional>
#include <vector>

namespace emb::service {

void AddCacheMetrics(const EmbeddingStore& store, ScrapeTimeMetrics& metrics) {
  if (!store.info().host_tier) {
    return;
  }
  using prometheus::MetricType;
  std::vector<ScrapeTimeMetrics::GroupSample> samples = {
      {"embedding_cache_hits_total",
       "Rows looked up in a host-tier table that its GPU cache held (rows looked up, less the "
       "misses).",
       MetricType::Counter},
      {"embedding_cache_misses_total",
       "Rows looked up in a host-tier table that were read from pinned host memory.",
       MetricType::Counter},
      {"embedding_cache_rows", "Rows of a host-tier table in its GPU cache now.",
       MetricType::Gauge},
      {"embedding_cache_capacity_rows", "Rows a host-tier table's GPU cache can hold.",
       MetricType::Gauge},
      {"embedding_cache_bytes", "Bytes of the rows in a host-tier table's GPU cache now.",
       MetricType::Gauge},
      {"embedding_host_read_bytes_total",
       "Bytes of rows read from pinned host memory by lookups of a host-tier table (misses x "
       "row bytes).",
       MetricType::Counter},
  };
  metrics.AddGroup(std::move(samples), {{"table", store.info().name}},
                   [&store]() -> std::optional<std::vector<double>> {
                     const std::optional<CacheStats> s = store.cache_stats();
                     if (!s.has_value()) {
                       return std::nullopt;
                     }
                     const auto row_bytes = static_cast<double>(s->row_bytes);
                     const auto misses = static_cast<double>(s->misses);
                     return std::vector<double>{
                         static_cast<double>(std::max<int64_t>(0, s->lookups - s->misses)),
                         misses,
                         static_cast<double>(s->cached_rows),
                         static_cast<double>(s->capacity_rows),
                         static_cast<double>(s->cached_rows) * row_bytes,
                         misses * row_bytes,
                     };
                   });
}

}  // namespace emb::service
