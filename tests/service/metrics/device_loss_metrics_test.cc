#include "service/metrics/device_loss_metrics.h"

#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"
#include "prometheus/text_serializer.h"
#include "tests/testing/fake_clock.h"

namespace emb::service::device_loss_metrics_test {
namespace {

constexpr char kWhy[] =
    "cudaStreamSynchronize on cuda:0: cudaErrorIllegalAddress: an illegal memory access was "
    "encountered";

std::string Scrape(ScrapeTimeMetrics& metrics) {
  return prometheus::TextSerializer().Serialize(metrics.Collect());
}

bool Has(const std::string& text, const std::string& line) {
  return text.find("\n" + line + "\n") != std::string::npos;
}

// A clock that does not move, so that a scrape stays recent; waits of a day that must not wait.
DeviceLossMetrics::Options Options(testing::FakeClock& clock) {
  DeviceLossMetrics::Options options;
  options.clock = &clock;
  options.max_wait = absl::Hours(24);
  options.send_grace = absl::ZeroDuration();
  return options;
}

TEST(DeviceLossMetrics, ZeroUntilLostThenOneWithTheCudaErrorsName) {
  testing::FakeClock clock;
  ScrapeTimeMetrics metrics;
  DeviceLossMetrics loss("cuda:0", metrics, Options(clock));
  std::string text = Scrape(metrics);
  EXPECT_TRUE(Has(text, "embedding_device_lost{device=\"cuda:0\"} 0")) << text;
  EXPECT_EQ(text.find("embedding_device_lost_error_info"), std::string::npos) << text;
  EXPECT_FALSE(loss.lost());

  loss.SetLost(kWhy);
  loss.SetLost("cudaMalloc on cuda:0: cudaErrorLaunchFailure: ...");  // the first one stays
  EXPECT_TRUE(loss.lost());
  text = Scrape(metrics);
  EXPECT_TRUE(Has(text, "embedding_device_lost{device=\"cuda:0\"} 1")) << text;
  EXPECT_TRUE(Has(text,
                  "embedding_device_lost_error_info{device=\"cuda:0\",error=\"cudaErrorIllegal"
                  "Address\"} 1"))
      << text;
  EXPECT_EQ(text.find("cudaErrorLaunchFailure"), std::string::npos) << text;
}

TEST(DeviceLossMetrics, CpuIsNeverLost) {
  ScrapeTimeMetrics metrics;
  DeviceLossMetrics loss("cpu", metrics);
  const std::string text = Scrape(metrics);
  EXPECT_TRUE(Has(text, "# TYPE embedding_device_lost gauge")) << text;
  EXPECT_TRUE(Has(text, "embedding_device_lost{device=\"cpu\"} 0")) << text;
}

TEST(DeviceLossMetrics, ErrorNameIsTheCudaErrorOrUnknown) {
  EXPECT_EQ(DeviceLossMetrics::ErrorName(kWhy), "cudaErrorIllegalAddress");
  EXPECT_EQ(DeviceLossMetrics::ErrorName("x: cudaErrorECCUncorrectable"),
            "cudaErrorECCUncorrectable");
  EXPECT_EQ(DeviceLossMetrics::ErrorName("the context is gone"), "unknown");
  EXPECT_EQ(DeviceLossMetrics::ErrorName(""), "unknown");
}

TEST(DeviceLossMetrics, NoWaitWhereNobodyScrapes) {
  testing::FakeClock clock;
  ScrapeTimeMetrics metrics;
  DeviceLossMetrics loss("cuda:0", metrics, Options(clock));
  loss.SetLost(kWhy);
  EXPECT_FALSE(loss.WaitUntilScraped());  // never scraped: at once, not after a day
}

TEST(DeviceLossMetrics, NoWaitWhereTheLastScrapeIsOlderThanTheLongestWait) {
  testing::FakeClock clock;
  ScrapeTimeMetrics metrics;
  DeviceLossMetrics::Options options = Options(clock);
  options.max_wait = absl::Seconds(60);
  DeviceLossMetrics loss("cuda:0", metrics, options);
  Scrape(metrics);
  clock.Advance(absl::Seconds(61));  // the scraper went away
  loss.SetLost(kWhy);
  EXPECT_FALSE(loss.WaitUntilScraped());
}

TEST(DeviceLossMetrics, WaitsForAScrapeThatReadsTheLoss) {
  testing::FakeClock clock;
  ScrapeTimeMetrics metrics;
  DeviceLossMetrics loss("cuda:0", metrics, Options(clock));
  Scrape(metrics);  // a scraper watches this server
  loss.SetLost(kWhy);
  absl::Notification done;
  bool scraped = false;
  std::thread waiter([&] {
    scraped = loss.WaitUntilScraped();
    done.Notify();
  });
  EXPECT_FALSE(done.HasBeenNotified());  // the scrape before the loss does not count
  const std::string text = Scrape(metrics);
  waiter.join();
  EXPECT_TRUE(scraped);
  EXPECT_TRUE(Has(text, "embedding_device_lost{device=\"cuda:0\"} 1")) << text;
}

TEST(DeviceLossMetrics, GivesUpAfterTheLongestWait) {
  testing::FakeClock clock;
  ScrapeTimeMetrics metrics;
  DeviceLossMetrics::Options options = Options(clock);
  options.max_wait = absl::Milliseconds(20);  // real time: no scrape comes
  DeviceLossMetrics loss("cuda:0", metrics, options);
  Scrape(metrics);
  loss.SetLost(kWhy);
  EXPECT_FALSE(loss.WaitUntilScraped());
}

}  // namespace
}  // namespace emb::service::device_loss_metrics_test
