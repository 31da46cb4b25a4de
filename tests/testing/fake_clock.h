// FakeClock: a Clock (service/common/clock.h) that moves only when a test tells it to.
#ifndef EMB_TESTS_TESTING_FAKE_CLOCK_H_
#define EMB_TESTS_TESTING_FAKE_CLOCK_H_

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "service/common/clock.h"

namespace emb::testing {

class FakeClock final : public service::Clock {
 public:
  absl::Time Now() override {
    absl::MutexLock lock(&mu_);
    return now_;
  }
  void Advance(absl::Duration d) {
    absl::MutexLock lock(&mu_);
    now_ += d;
  }

 private:
  absl::Mutex mu_;
  absl::Time now_ ABSL_GUARDED_BY(mu_) = absl::FromUnixSeconds(1700000000);
};

}  // namespace emb::testing

#endif  // EMB_TESTS_TESTING_FAKE_CLOCK_H_
