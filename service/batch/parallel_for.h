// ParallelFor: a fixed pool of threads that runs the iterations of one loop at a time alongside
// the calling thread. The batcher uses it to answer a batch's callers in parallel: finishing a
// gRPC call serializes and sends its answer on the calling thread, which one thread cannot do fast
// enough for a large batch. Thread-safe: while one Run() uses the helpers, another runs on its
// own caller.
#ifndef EMB_SERVICE_BATCH_PARALLEL_FOR_H_
#define EMB_SERVICE_BATCH_PARALLEL_FOR_H_

#include <functional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace emb::service {

class ParallelFor {
 public:
  // `threads` helpers besides the caller; 0 runs every loop on the caller alone.
  explicit ParallelFor(int threads);
  // Joins the helpers; no Run() may be in progress.
  ~ParallelFor();
  ParallelFor(const ParallelFor&) = delete;
  ParallelFor& operator=(const ParallelFor&) = delete;

  // Calls fn(i) once for each i in [0, n), on the caller and the helpers, and returns when all
  // calls have returned.
  void Run(int n, const std::function<void(int)>& fn);

  int threads() const { return static_cast<int>(helpers_.size()); }

 private:
  void Help();
  // Claims and runs iterations of the current loop until none is left.
  void Work() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  absl::Mutex run_mu_;  // held by the Run() that has the helpers
  absl::Mutex mu_;
  const std::function<void(int)>* fn_ ABSL_GUARDED_BY(mu_) = nullptr;
  int next_ ABSL_GUARDED_BY(mu_) = 0;
  int end_ ABSL_GUARDED_BY(mu_) = 0;
  int running_ ABSL_GUARDED_BY(mu_) = 0;  // iterations claimed and not yet finished
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> helpers_;
};

}  // namespace emb::service

#endif  // EMB_SERVICE_BATCH_PARALLEL_FOR_H_
