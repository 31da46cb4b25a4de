#include "service/batch/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <memory>
#include <utility>

namespace emb::service {
namespace {

// One Run()'s loop, shared by the caller and the helper tasks it posted. A helper that starts
// after the loop is done finds no iteration left and touches nothing but this state, which the
// last of its owners frees.
struct Loop {
  Loop(int n, const std::function<void(int)>* fn) : n(n), fn(fn) {}

  // Claims and runs iterations until none is left.
  void Work() {
    for (int i = next.fetch_add(1, std::memory_order_relaxed); i < n;
         i = next.fetch_add(1, std::memory_order_relaxed)) {
      (*fn)(i);
      absl::MutexLock lock(&mu);
      ++finished;
    }
  }

  const int n;
  const std::function<void(int)>* const fn;  // valid until `finished` reaches n
  std::atomic<int> next{0};
  absl::Mutex mu;
  int finished ABSL_GUARDED_BY(mu) = 0;
};

}  // namespace

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

void ThreadPool::Run(int n, const std::function<void(int)>& fn) {
  if (workers_.empty() || n <= 1) {
    for (int i = 0; i < n; ++i) {
      fn(i);
    }
    return;
  }
  auto loop = std::make_shared<Loop>(n, &fn);
  {
    // Ahead of the posted tasks: a loop's caller waits for it (the batcher's copy holds a store
    // slot), while a posted task's caller has moved on.
    absl::MutexLock lock(&mu_);
    for (int h = std::min(n - 1, threads()); h > 0; --h) {
      tasks_.push_front([loop] { loop->Work(); });
    }
  }
  loop->Work();
  absl::MutexLock lock(&loop->mu);
  loop->mu.Await(absl::Condition(
      +[](Loop* l) ABSL_NO_THREAD_SAFETY_ANALYSIS { return l->finished == l->n; }, loop.get()));
}

}  // namespace emb::service
