// AdminWorker: one thread that runs jobs one at a time in the order they were queued, with a
// bounded number waiting behind the one that runs. The admin service has one for its saves and
// version loads (a save or a load takes as long as a table's bytes take to reach the disk or the
// device, so it runs off gRPC's threads; one thread for all of them keeps the threads and memory
// maps they cost constant, whatever the number of calls: a thread per call, joined only at
// shutdown, took 8 MiB and 2 maps each until the process met vm.max_map_count). Thread-safe.
#ifndef EMB_SERVICE_RPC_ADMIN_WORKER_H_
#define EMB_SERVICE_RPC_ADMIN_WORKER_H_

#include <cstddef>
#include <deque>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"

namespace emb::service {

class AdminWorker {
 public:
  // A queued job. Called exactly once: with OK on the worker thread when its turn comes, or with
  // UNAVAILABLE on the thread that calls Shutdown() if the worker stops before it starts.
  using Job = absl::AnyInvocable<void(const absl::Status& start) &&>;

  // Starts the worker thread; at most `max_queued` jobs wait behind the running one. `jobs` names
  // them in its refusals ("saves and version loads"), `queue` the queue ("the admin service's
  // queue").
  AdminWorker(size_t max_queued, std::string jobs, std::string queue);
  // Calls Shutdown().
  ~AdminWorker();
  AdminWorker(const AdminWorker&) = delete;
  AdminWorker& operator=(const AdminWorker&) = delete;

  // Queues `job` behind those already queued. RESOURCE_EXHAUSTED (naming the limit) when
  // `max_queued` jobs wait already, UNAVAILABLE after Shutdown(): then `job` is destroyed
  // without being called.
  absl::Status Post(Job job);

  // Stops taking jobs, calls each waiting job with UNAVAILABLE, waits for the running one to
  // return and joins the thread. Idempotent; may not be called from a job.
  void Shutdown();

  size_t max_queued() const { return max_queued_; }

 private:
  void Work();

  const size_t max_queued_;
  const std::string jobs_;
  const std::string queue_name_;
  absl::Mutex mu_;
  std::deque<Job> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  absl::Mutex join_mu_;  // one Shutdown() joins; a second waits for it
  std::thread thread_ ABSL_GUARDED_BY(join_mu_);
};

}  // namespace emb::service

#endif  // EMB_SERVICE_RPC_ADMIN_WORKER_H_
