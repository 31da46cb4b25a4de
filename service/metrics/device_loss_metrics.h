// DeviceLossMetrics: whether the server's device is lost, as Prometheus samples read at scrape
// time, and the wait that lets a scrape record the loss before the server exits.
//
// A sticky CUDA error (the context is dead, STYLE §3) makes the server exit 1 so that the
// orchestrator restarts it; a process that exits at once is never scraped with the loss, and its
// successor starts from zero. So the server, once its health is NOT_SERVING, marks the device lost
// here and waits until a scrape has read that (when anyone scrapes it), then exits. Samples, on
// the ScrapeTimeMetrics given, labelled device="cpu" or "cuda:N":
//   embedding_device_lost{device}                   0, or 1 once the device is lost (never on
//                                                   the CPU)
//   embedding_device_lost_error_info{device, error} 1 once lost, `error` the CUDA error's name
//                                                   (cudaErrorIllegalAddress, ...; "unknown"
//                                                   where the reason names none); absent before
// Thread-safe.
#ifndef EMB_SERVICE_METRICS_DEVICE_LOSS_METRICS_H_
#define EMB_SERVICE_METRICS_DEVICE_LOSS_METRICS_H_

#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "service/common/clock.h"
#include "service/metrics/scrape_time_metrics.h"

namespace emb::service {

class DeviceLossMetrics {
 public:
  struct Options {
    // WaitUntilScraped waits only where a scrape came within this long before the loss, and at
    // most this long: the PodMonitor scrapes every 15 s, Prometheus by default every minute.
    absl::Duration max_wait = absl::Seconds(60);
    // After the scrape has read the loss: time for its answer to be written to the scraper.
    absl::Duration send_grace = absl::Seconds(1);
    Clock* clock = Clock::Real();  // when scrapes came (the waits themselves are real time)
  };

  // Adds the samples of `device` ("cpu", "cuda:N") to `metrics`, which must outlive this object's
  // use and whose scrapes must not outlive this object.
  DeviceLossMetrics(std::string device, ScrapeTimeMetrics& metrics, Options options);
  DeviceLossMetrics(std::string device, ScrapeTimeMetrics& metrics)
      : DeviceLossMetrics(std::move(device), metrics, Options()) {}

  // Marks the device lost, `why` naming the CUDA error (CudaCheck's message: "... cudaErrorXxx:
  // ..."). The first call's error is the one reported.
  void SetLost(absl::string_view why);
  bool lost() const;
  // "cpu" or "cuda:N", as constructed.
  const std::string& device() const { return device_; }

  // After SetLost: where the server was scraped within max_wait before now, waits until a scrape
  // has read the loss (then send_grace, for its answer to leave), at most max_wait; true if one
  // did. Returns false at once where no scrape came within max_wait (nobody watches).
  bool WaitUntilScraped();

  // The CUDA error name in `why` (the first word starting "cudaError"), or "unknown".
  static std::string ErrorName(absl::string_view why);

 private:
  // One scrape's read of the samples: returns {lost}.
  double Read();

  const std::string device_;
  ScrapeTimeMetrics& metrics_;
  const Options options_;
  mutable absl::Mutex mu_;
  bool lost_ ABSL_GUARDED_BY(mu_) = false;
  std::string error_ ABSL_GUARDED_BY(mu_);
  // When a scrape last read the samples, and whether one has read the loss.
  absl::Time last_scrape_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  bool loss_scraped_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace emb::service

#endif  // EMB_SERVICE_METRICS_DEVICE_LOSS_METRICS_H_
