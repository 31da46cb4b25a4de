// ThreadPool: a fixed set of threads that run posted tasks, and loops whose iterations the calling
// thread shares with them. The batcher copies a batch's rows into its callers' buffers with Run()
// and finishes the calls with Post(): finishing a gRPC call serializes and sends its answer on the
// calling thread (a 768 KiB answer takes about 150 us), which neither the completion thread nor
// one helper should do for every caller in turn. Thread-safe: loops and tasks from any number of
// threads share the pool.
#ifndef EMB_SERVICE_BATCH_THREAD_POOL_H_
#define EMB_SERVICE_BATCH_THREAD_POOL_H_

#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/synchronization/mutex.h"

namespace emb::service {

class ThreadPool {
 public:
  // `threads` workers; 0 runs every task and loop on the thread that hands it over.
  explicit ThreadPool(int threads);
  // Runs every task already posted, then joins the workers. No Post() or Run() may be in progress.
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // Runs `task` on a worker, in post order among the posted tasks (with no workers: now, on the
  // caller).
  void Post(absl::AnyInvocable<void() &&> task);

  // Calls fn(i) once for each i in [0, n), on the caller and on the workers that are free, and
  // returns when all calls have returned. The workers take a loop's iterations before any posted
  // task still queued; the caller claims iterations too, so a loop never waits for a busy pool: at
  // worst the caller runs it alone.
  void Run(int n, const std::function<void(int)>& fn);

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
