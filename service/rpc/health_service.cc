#include "service/rpc/health_service.h"

#include <algorithm>
#include <utility>

namespace emb::service {

using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;

// One Watch stream: writes the status it is given whenever it differs from the last one written,
// one write at a time, and ends after the last. Deletes itself when gRPC is done with the call.
// gRPC is called without mu_ held, so that no reaction can find it taken.
class HealthService::Watcher final : public grpc::ServerWriteReactor<HealthCheckResponse> {
 public:
  Watcher(HealthService* service, std::string name) : service_(service), name_(std::move(name)) {}

  const std::string& name() const { return name_; }

  // Makes `status` the one to write; with `last`, the stream ends once it is written.
  void Send(ServingStatus status, bool last) {
    {
      absl::MutexLock lock(&mu_);
      want_ = status;
      end_after_ = end_after_ || last;
    }
    Step();
  }

  void OnWriteDone(bool ok) override {
    {
      absl::MutexLock lock(&mu_);
      writing_ = false;
      broken_ = broken_ || !ok;  // the client is gone or the call was cancelled
    }
    Step();
  }

  void OnCancel() override {
    {
      absl::MutexLock lock(&mu_);
      broken_ = true;
    }
    Step();
  }

  void OnDone() override {
    service_->Forget(this);
    delete this;
  }

 private:
  // Starts the next write, or ends the call, if it is time to.
  void Step() {
    bool write = false;
    grpc::Status end;
    {
      absl::MutexLock lock(&mu_);
      if (writing_ || finished_) {
        return;  // OnWriteDone steps again
      }
      if (broken_) {
        end = grpc::Status(grpc::StatusCode::CANCELLED, "the watch was cancelled");
      } else if (want_ != written_) {
        response_.set_status(want_);
        written_ = want_;
        writing_ = true;
        write = true;
      } else if (!end_after_) {
        return;
      }
      finished_ = !write;
    }
    if (write) {
      StartWrite(&response_);
    } else {
      Finish(end);
    }
  }

  HealthService* const service_;
  const std::string name_;  // the service watched
  absl::Mutex mu_;
  // UNKNOWN is never sent (Watch sends the first status before gRPC sees the reactor), so a
  // stream that has written nothing differs from every status it is given.
  ServingStatus want_ ABSL_GUARDED_BY(mu_) = HealthCheckResponse::UNKNOWN;
  ServingStatus written_ ABSL_GUARDED_BY(mu_) = HealthCheckResponse::UNKNOWN;
  bool end_after_ ABSL_GUARDED_BY(mu_) = false;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;  // response_ belongs to gRPC until OnWriteDone
  bool broken_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  HealthCheckResponse response_;
};

HealthService::HealthService(std::vector<std::string> services, prometheus::Gauge* serving)
    : services_(std::move(services)), serving_gauge_(serving) {
  absl::MutexLock lock(&mu_);
  Export();
}

HealthService::~HealthService() {
  absl::MutexLock lock(&mu_);
  // gRPC calls OnDone for every call before the server it belongs to is destroyed.
  mu_.Await(absl::Condition(
      +[](absl::flat_hash_set<Watcher*>* w) { return w->empty(); }, &watchers_));
}

HealthService::ServingStatus HealthService::StatusOf(const std::string& service) const {
  if (!service.empty() &&
      std::find(services_.begin(), services_.end(), service) == services_.end()) {
    return HealthCheckResponse::SERVICE_UNKNOWN;
  }
  return serving_ ? HealthCheckResponse::SERVING : HealthCheckResponse::NOT_SERVING;
}

void HealthService::SetServing(bool serving) {
  absl::MutexLock lock(&mu_);
  if (shut_down_) {
    return;
  }
  serving_ = serving;
  Export();
  TellWatchers(/*last=*/false);
}

void HealthService::Shutdown() {
  absl::MutexLock lock(&mu_);
  shut_down_ = true;
  serving_ = false;
  Export();
  TellWatchers(/*last=*/true);
}

void HealthService::Export() {
  if (serving_gauge_ != nullptr) {
    serving_gauge_->Set(serving_ ? 1 : 0);
  }
}

void HealthService::TellWatchers(bool last) {
  for (Watcher* w : watchers_) {
    // Holding mu_ keeps `w` alive: its OnDone waits in Forget.
    w->Send(StatusOf(w->name()), last);
  }
}

void HealthService::Forget(Watcher* watcher) {
  absl::MutexLock lock(&mu_);
  watchers_.erase(watcher);
}

grpc::ServerUnaryReactor* HealthService::Check(grpc::CallbackServerContext* ctx,
                                               const HealthCheckRequest* request,
                                               HealthCheckResponse* response) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  ServingStatus status;
  {
    absl::MutexLock lock(&mu_);
    status = StatusOf(request->service());
  }
  if (status == HealthCheckResponse::SERVICE_UNKNOWN) {
    reactor->Finish(
        grpc::Status(grpc::StatusCode::NOT_FOUND, "unknown service '" + request->service() + "'"));
    return reactor;
  }
  response->set_status(status);
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerWriteReactor<HealthCheckResponse>* HealthService::Watch(
    grpc::CallbackServerContext* /*ctx*/, const HealthCheckRequest* request) {
  auto* watcher = new Watcher(this, request->service());
  absl::MutexLock lock(&mu_);
  watchers_.insert(watcher);
  // An unknown name stays SERVICE_UNKNOWN (the stream stays open, as the protocol says); a known
  // one follows SetServing. After Shutdown the stream ends after its one status.
  watcher->Send(StatusOf(watcher->name()), /*last=*/shut_down_);
  return watcher;
}

}  // namespace emb::service
