// Clock: where the service reads the time, so that tests can inject a fake one (STYLE §8).
// The batcher (deadlines, queue waits, finishing), the stores (stage timings, the GPU store's
// polling and its upload) and the service's admission by deadline (UnsentAnswers: the drain rates
// it learns) read the clock they were given (StoreOptions::clock, the Batcher's and the
// service's arguments). The gRPC call interceptor times whole calls with
// std::chrono::steady_clock, and the shutdown sequence reads absl::Now(): neither is on a path
// that a test drives with a fake clock.
#ifndef EMB_SERVICE_COMMON_CLOCK_H_
#define EMB_SERVICE_COMMON_CLOCK_H_

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace emb::service {

// Implementations are thread-safe.
class Clock {
 public:
  virtual ~Clock() = default;
  virtual absl::Time Now() = 0;
  // The system clock (absl::Now()): stateless, and never destroyed.
  static Clock* Real();
};

namespace internal {
class RealClock final : public Clock {
 public:
  absl::Time Now() override { return absl::Now(); }
};
}  // namespace internal

inline Clock* Clock::Real() {
  static Clock* const clock = new internal::RealClock();
  return clock;
}

// Seconds from `start` to clock->Now().
inline double SecondsSince(Clock* clock, absl::Time start) {
  return absl::ToDoubleSeconds(clock->Now() - start);
}

}  // namespace emb::service

#endif  // EMB_SERVICE_COMMON_CLOCK_H_
