#include "service/metrics/device_loss_metrics.h"

#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/time/clock.h"
#include "service/common/log.h"

namespace emb::service {

DeviceLossMetrics::DeviceLossMetrics(std::string device, ScrapeTimeMetrics& metrics,
                                     Options options)
    : device_(std::move(device)), metrics_(metrics), options_(options) {
  metrics_.AddGroup({{"embedding_device_lost",
                      "1 once the server's device is lost (a sticky CUDA error: health "
                      "NOT_SERVING, then exit 1 after the next scrape); 0 before, and always on "
                      "the CPU.",
                      prometheus::MetricType::Gauge}},
                    {{"device", device_}}, [this]() -> std::optional<std::vector<double>> {
                      return std::vector<double>{Read()};
                    });
}

std::string DeviceLossMetrics::ErrorName(absl::string_view why) {
  const size_t start = why.find("cudaError");
  if (start == absl::string_view::npos) {
    return "unknown";
  }
  size_t end = start;
  while (end < why.size() && (absl::ascii_isalnum(why[end]) || why[end] == '_')) {
    ++end;
  }
  return std::string(why.substr(start, end - start));
}

void DeviceLossMetrics::SetLost(absl::string_view why) {
  {
    absl::MutexLock lock(&mu_);
    if (!error_.empty()) {
      return;  // an earlier call reports the loss
    }
    error_ = ErrorName(why);
  }
  // Outside mu_: a scrape holds the group list's lock while it reads this object's samples. The
  // info sample is in place before the loss shows, so a scrape that reads the loss has both.
  metrics_.AddGroup({{"embedding_device_lost_error_info",
                      "1 once the device is lost, labelled with the name of the CUDA error that "
                      "lost it; absent before.",
                      prometheus::MetricType::Gauge}},
                    {{"device", device_}, {"error", ErrorName(why)}},
                    []() -> std::optional<std::vector<double>> { return std::vector<double>{1}; });
  absl::MutexLock lock(&mu_);
  lost_ = true;
}

bool DeviceLossMetrics::lost() const {
  absl::MutexLock lock(&mu_);
  return lost_;
}

double DeviceLossMetrics::Read() {
  absl::MutexLock lock(&mu_);
  last_scrape_ = options_.clock->Now();
  loss_scraped_ = loss_scraped_ || lost_;
  return lost_ ? 1 : 0;
}

bool DeviceLossMetrics::WaitUntilScraped() {
  {
    absl::MutexLock lock(&mu_);
    if (options_.clock->Now() - last_scrape_ > options_.max_wait) {
      return false;  // nobody scrapes this server
    }
    LogError("device ", device_, " lost (", error_, "): embedding_device_lost is 1 until /metrics",
             " is next scraped (at most ", absl::FormatDuration(options_.max_wait), ")");
    if (!mu_.AwaitWithTimeout(absl::Condition(&loss_scraped_), options_.max_wait)) {
      LogError("no scrape of /metrics read the device loss within ",
               absl::FormatDuration(options_.max_wait));
      return false;
    }
  }
  absl::SleepFor(options_.send_grace);
  return true;
}

}  // namespace emb::service
