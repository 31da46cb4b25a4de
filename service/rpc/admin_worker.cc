#include "service/rpc/admin_worker.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace emb::service {

AdminWorker::AdminWorker(size_t max_queued, std::string jobs, std::string queue)
    : max_queued_(max_queued),
      jobs_(std::move(jobs)),
      queue_name_(std::move(queue)),
      thread_([this] { Work(); }) {}

AdminWorker::~AdminWorker() { Shutdown(); }

absl::Status AdminWorker::Post(Job job) {
  absl::MutexLock lock(&mu_);
  if (stopping_) {
    return absl::UnavailableError("the server is shutting down");
  }
  if (queue_.size() >= max_queued_) {
    return absl::ResourceExhaustedError(
        absl::StrCat(queue_.size(), " ", jobs_, " wait already, the limit of ", queue_name_, " (",
                     max_queued_, ", behind the one running); retry when one has ended"));
  }
  queue_.push_back(std::move(job));
  return absl::OkStatus();
}

void AdminWorker::Shutdown() {
  std::deque<Job> cancelled;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    cancelled.swap(queue_);
  }
  for (Job& job : cancelled) {
    std::move(job)(absl::UnavailableError(absl::StrCat(
        "the server is shutting down: this call waited behind other ", jobs_,
        " and was not started; nothing of it was done, retry it after the restart or on another "
        "replica")));
  }
  absl::MutexLock lock(&join_mu_);
  if (thread_.joinable()) {
    thread_.join();  // the running job, if any, returns first
  }
}

void AdminWorker::Work() {
  for (;;) {
    Job job;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](AdminWorker* w)
               ABSL_NO_THREAD_SAFETY_ANALYSIS { return w->stopping_ || !w->queue_.empty(); },
          this));
      if (queue_.empty()) {
        return;  // stopping: Shutdown() took the waiting jobs
      }
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    std::move(job)(absl::OkStatus());
  }
}

}  // namespace emb::service
