#include "service/batch/thread_pool.h"

#include <utility>

namespace emb::service {

ThreadPool::ThreadPool(int threads) {
  for (int i = 0; i < threads; ++i) {
    workers_.emplace_back([this] { Work(); });
  }
}

ThreadPool::~ThreadPool() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  for (std::thread& t : workers_) {
    t.join();
  }
}

void ThreadPool::Post(absl::AnyInvocable<void() &&> task) {
  if (workers_.empty()) {
    std::move(task)();
    return;
  }
  absl::MutexLock lock(&mu_);
  tasks_.push_back(std::move(task));
}

void ThreadPool::Work() {
  for (;;) {
    absl::AnyInvocable<void() &&> task;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](ThreadPool* p)
               ABSL_NO_THREAD_SAFETY_ANALYSIS { return p->stopping_ || !p->tasks_.empty(); },
          this));
      if (tasks_.empty()) {
        return;  // stopping, and every task has run
      }
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    std::move(task)();
  }
}

}  // namespace emb::service
