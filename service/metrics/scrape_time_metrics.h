// ScrapeTimeMetrics: metrics whose values are read when Prometheus scrapes, not kept up to date by
// the request path: the standard process_* metrics (prometheus-cpp has no process collector; read
// from /proc/self), and samples that other parts of the server register as callbacks (the GPU's
// memory, read from CUDA; a host tier's cache, read from its store). Register it with the exposer
// beside Metrics::registry(); whatever the callbacks read must outlive the exposer's scrapes.
//
// Thread-safe: AddGauge before the exposer serves it, AddGroup at any time; Collect() on the
// exposer's threads, at once.
#ifndef EMB_SERVICE_METRICS_SCRAPE_TIME_METRICS_H_
#define EMB_SERVICE_METRICS_SCRAPE_TIME_METRICS_H_

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
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

  // One sample of a group (AddGroup): its family, and whether it is a counter or a gauge.
  struct GroupSample {
    std::string name;
    std::string help;
    prometheus::MetricType type = prometheus::MetricType::Gauge;  // Counter or Gauge
  };
  // The values of a group's samples at scrape time, one per GroupSample in order; nullopt leaves
  // the whole group out of that scrape.
  using ReadGroup = std::function<std::optional<std::vector<double>>()>;
  // Samples with the same labels whose values come from one read per scrape (figures that must
  // agree with each other, or that are costly to read). A counter never goes down: where the
  // source gives less than the counter reported before (a figure derived from counts read at
  // slightly different moments), the counter reports its highest value again.
  void AddGroup(std::vector<GroupSample> samples, prometheus::Labels labels, ReadGroup read);

  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  struct Sample {
    std::string name;
    std::string help;
    prometheus::Labels labels;
    Read read;
  };
  struct Group {
    std::vector<GroupSample> samples;
    prometheus::Labels labels;
    ReadGroup read;
    // The highest value each counter reported (0 for a gauge), under mu_.
    std::vector<double> highest;
  };
  // The sample of family `name` added to `out` (the family made where it is not there yet).
  static prometheus::ClientMetric& AddSample(std::vector<prometheus::MetricFamily>& out,
                                             const std::string& name, const std::string& help,
                                             prometheus::MetricType type,
                                             const prometheus::Labels& labels);

  std::vector<Sample> gauges_;
  mutable absl::Mutex mu_;
  mutable std::vector<Group> groups_ ABSL_GUARDED_BY(mu_);
};

}  // namespace emb::service

#endif  // EMB_SERVICE_METRICS_SCRAPE_TIME_METRICS_H_
