// The GPU cache of a table in the host tier (a table larger than the GPU memory it may use, served
// from pinned host memory), as Prometheus samples read from its store at scrape time.
#ifndef EMB_SERVICE_SERVER_CACHE_METRICS_H_
#define EMB_SERVICE_SERVER_CACHE_METRICS_H_

#include "service/metrics/scrape_time_metrics.h"
#include "service/store/embedding_store.h"

namespace emb::service {

// For a store whose table is in a host tier (info().host_tier), adds to `metrics` one group of
// samples labelled table=NAME, from one EmbeddingStore::cache_stats() per scrape:
//   embedding_cache_hits_total        counter  rows looked up and found in the cache
//   embedding_cache_misses_total      counter  rows read from host memory
//   embedding_cache_rows              gauge    rows in the cache now
//   embedding_cache_capacity_rows     gauge    rows the cache can hold
//   embedding_cache_bytes             gauge    bytes of the rows in the cache
//   embedding_host_read_bytes_total   counter  bytes of rows read from host memory
// Hits are the rows looked up less the misses, counted as batches end while misses are counted as
// they happen: a scrape during a batch may see fewer hits than one before, and the counter then
// stays where it was (ScrapeTimeMetrics::AddGroup). Adds nothing for any other store. `store` must
// outlive the scrapes of `metrics`.
void AddCacheMetrics(const EmbeddingStore& store, ScrapeTimeMetrics& metrics);

}  // namespace emb::service

#endif  // EMB_SERVICE_SERVER_CACHE_METRICS_H_
