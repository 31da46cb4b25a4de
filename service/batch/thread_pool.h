// ThreadPool: a fixed set of threads that run posted tasks, in post order. The batcher finishes a
// batch's calls after the first with it: finishing a gRPC call serializes and sends its answer on
// the calling thread (a 768 KiB answer takes about 150 us), which the completion thread should not
// do for every caller in turn. Thread-safe: tasks from any number of threads share the pool.
#ifndef EMB_SERVICE_BATCH_THREAD_POOL_H_
#define EMB_SERVICE_BATCH_THREAD_POOL_H_

#include <deque>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/synchronization/mutex.h"

namespace emb::service {

class ThreadPool {
 public:
  // `threads` workers; 0 runs every task on the thread that posts it.
  explicit ThreadPool(int threads);
  // Runs every task already posted, then joins the workers. No Post() may be in progress.
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // Runs `task` on a worker, in post order among the posted tasks (with no workers: now, on the
  // caller).
  void Post(absl::AnyInvocable<void() &&> task);

  int threads() const { return static_cast<int>(workers_.size()); }

 private:
  void Work();

  absl::Mutex mu_;
  std::deque<absl::AnyInvocable<void() &&>> tasks_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> workers_;
};

}  // namespace emb::service

#endif  // EMB_SERVICE_BATCH_THREAD_POOL_H_
