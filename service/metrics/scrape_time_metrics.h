// ScrapeTimeMetrics: metrics whose values are read when Prometheus scrapes, not kept up to date by
// the request path: the standard process_* metrics (prometheus-cpp has no process collector; read
// from /proc/self), and gauges that other parts of the server register as callbacks (the GPU's
// memory, read from CUDA). Register it with the exposer beside Metrics::registry().
//
// Thread-safe: Add* before the exposer serves it; Collect() on the exposer's threads.
#ifndef EMB_SERVICE_METRICS_SCRAPE_TIME_METRICS_H_
#define EMB_SERVICE_METRICS_SCRAPE_TIME_METRICS_H_

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "prometheus/collectable.h"
#include "prometheus/labels.h"
#include "prometheus/metric_family.h"

namespace emb::service {

class ScrapeTimeMetrics final : public prometheus::Collectable {
 public:
  // The value of one sample at scrape time; nullopt leaves the sample out of that scrape.
  using Read = std::function<std::optional<double>()>;

  // With the process metrics: process_cpu_seconds_total, process_resident_memory_bytes,
  // process_virtual_memory_bytes, process_open_fds, process_max_fds and
  // process_start_time_seconds, as Prometheus's client libraries name them.
  ScrapeTimeMetrics();

  // A gauge sample of family `name` (one help text per family: the first given).
  void AddGauge(const std::string& name, const std::string& help, prometheus::Labels labels,
                Read read);

  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  struct Sample {
    std::string name;
    std::string help;
    prometheus::Labels labels;
    Read read;
  };
  std::vector<Sample> gauges_;
};

}  // namespace emb::service

#endif  // EMB_SERVICE_METRICS_SCRAPE_TIME_METRICS_H_
