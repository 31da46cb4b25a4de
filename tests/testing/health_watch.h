// A client of grpc.health.v1.Health/Watch for tests: the statuses a server streams, one at a time.
#ifndef EMB_TESTS_TESTING_HEALTH_WATCH_H_
#define EMB_TESTS_TESTING_HEALTH_WATCH_H_

#include <memory>
#include <optional>
#include <string>

#include "absl/time/time.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/grpcpp.h"

namespace emb::testing {

using HealthStatus = grpc::health::v1::HealthCheckResponse;

// A health Watch call on a server, read one status at a time; cancelled at the end of its scope.
class HealthWatch {
 public:
  HealthWatch(const std::string& target, const std::string& service, absl::Duration timeout)
      : stub_(grpc::health::v1::Health::NewStub(
            grpc::CreateChannel(target, grpc::InsecureChannelCredentials()))) {
    ctx_.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
    grpc::health::v1::HealthCheckRequest request;
    request.set_service(service);
    reader_ = stub_->Watch(&ctx_, request);
  }
  ~HealthWatch() {
    if (!finished_) {
      ctx_.TryCancel();
      (void)reader_->Finish();
    }
  }

  // The next status the server sends; nullopt once the stream has ended.
  std::optional<HealthStatus::ServingStatus> Next() {
    HealthStatus response;
    if (!reader_->Read(&response)) {
      return std::nullopt;
    }
    return response.status();
  }
  // How the call ended (after Next() returned nullopt).
  grpc::Status Finish() {
    finished_ = true;
    return reader_->Finish();
  }

 private:
  std::unique_ptr<grpc::health::v1::Health::Stub> stub_;
  grpc::ClientContext ctx_;
  std::unique_ptr<grpc::ClientReader<HealthStatus>> reader_;
  bool finished_ = false;
};

}  // namespace emb::testing

#endif  // EMB_TESTS_TESTING_HEALTH_WATCH_H_
