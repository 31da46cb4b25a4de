#include "service/rpc/health_service.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "service/metrics/metrics.h"

namespace emb::service::health_service_test {
namespace {

// embedding_health_status follows the status: 0 from the start, 1 while SERVING, 0 after
// Shutdown for good.
TEST(HealthService, GaugeFollowsTheStatus) {
  Metrics metrics;
  prometheus::Gauge& gauge = metrics.health_status();
  gauge.Set(7);  // whatever it held before, the service says NOT_SERVING
  HealthService health(std::vector<std::string>{"embedding.v1.EmbeddingService"}, &gauge);
  EXPECT_EQ(gauge.Value(), 0);
  health.SetServing(true);
  EXPECT_EQ(gauge.Value(), 1);
  health.SetServing(false);  // draining
  EXPECT_EQ(gauge.Value(), 0);
  health.SetServing(true);
  EXPECT_EQ(gauge.Value(), 1);
  health.Shutdown();
  EXPECT_EQ(gauge.Value(), 0);
  health.SetServing(true);  // ignored after Shutdown
  EXPECT_EQ(gauge.Value(), 0);
}

TEST(HealthService, ServesWithoutAGauge) {
  HealthService health(std::vector<std::string>{});
  health.SetServing(true);
  health.Shutdown();
}

}  // namespace
}  // namespace emb::service::health_service_test
