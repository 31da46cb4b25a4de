#include "service/batch/parallel_for.h"

namespace emb::service {

ParallelFor::ParallelFor(int threads) {
  for (int i = 0; i < threads; ++i) {
    helpers_.emplace_back([this] { Help(); });
  }
}

ParallelFor::~ParallelFor() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  for (std::thread& t : helpers_) {
    t.join();
  }
}

void ParallelFor::Work() {
  while (next_ < end_) {
    const int i = next_++;
    ++running_;
    const std::function<void(int)>* fn = fn_;
    mu_.Unlock();
    (*fn)(i);
    mu_.Lock();
    --running_;
  }
}

void ParallelFor::Help() {
  absl::MutexLock lock(&mu_);
  for (;;) {
    mu_.Await(absl::Condition(
        +[](ParallelFor* p)
             ABSL_NO_THREAD_SAFETY_ANALYSIS { return p->stopping_ || p->next_ < p->end_; },
        this));
    if (stopping_) {
      return;
    }
    Work();
  }
}

void ParallelFor::Run(int n, const std::function<void(int)>& fn) {
  if (helpers_.empty() || n <= 1) {
    for (int i = 0; i < n; ++i) {
      fn(i);
    }
    return;
  }
  // One loop at a time uses the helpers; a loop that finds them busy runs on its caller alone
  // rather than wait.
  if (!run_mu_.TryLock()) {
    for (int i = 0; i < n; ++i) {
      fn(i);
    }
    return;
  }
  absl::MutexLock lock(&mu_);
  fn_ = &fn;
  next_ = 0;
  end_ = n;
  Work();
  mu_.Await(absl::Condition(
      +[](ParallelFor* p) ABSL_NO_THREAD_SAFETY_ANALYSIS { return p->running_ == 0; }, this));
  fn_ = nullptr;
  end_ = 0;
  next_ = 0;
  run_mu_.Unlock();
}

}  // namespace emb::service
