// The gRPC health service (grpc.health.v1.Health: Check and Watch) of embedding-server.
//
// gRPC's default health service answers SERVING from the moment the port opens, so a probe in the
// moment before the server marks itself NOT_SERVING could see a server without tables as ready.
// This one starts NOT_SERVING. Every name it knows ("" for the whole server, plus the names given)
// shares one status: the server is ready or it is not. Unknown names get NOT_FOUND (Check) or
// SERVICE_UNKNOWN (Watch), as the health protocol says. Shutdown() ends the Watch streams, so that
// they do not hold the server's shutdown until its deadline. The status is also exported as a
// gauge, 1 for SERVING and 0 for NOT_SERVING (embedding_health_status, Metrics). Thread-safe.
#ifndef EMB_SERVICE_RPC_HEALTH_SERVICE_H_
#define EMB_SERVICE_RPC_HEALTH_SERVICE_H_

#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "prometheus/gauge.h"

namespace emb::service {

class HealthService final : public grpc::health::v1::Health::CallbackService {
 public:
  // Knows "" and `services`, all NOT_SERVING. `serving`, where given, is set to 1 while they are
  // SERVING and 0 otherwise (0 from here on), and must outlive the service.
  explicit HealthService(std::vector<std::string> services, prometheus::Gauge* serving = nullptr);
  // Shutdown() must have run and every Watch call must have ended (the gRPC server is down).
  ~HealthService() override;

  // Sets every known name SERVING or NOT_SERVING; each Watch stream gets the new status.
  void SetServing(bool serving);
  // NOT_SERVING from now on; ends every Watch stream after its last status and answers later
  // Watch calls with NOT_SERVING and an end. Call before grpc::Server::Shutdown.
  void Shutdown();

  grpc::ServerUnaryReactor* Check(grpc::CallbackServerContext* ctx,
                                  const grpc::health::v1::HealthCheckRequest* request,
                                  grpc::health::v1::HealthCheckResponse* response) override;
  grpc::ServerWriteReactor<grpc::health::v1::HealthCheckResponse>* Watch(
      grpc::CallbackServerContext* ctx,
      const grpc::health::v1::HealthCheckRequest* request) override;

 private:
  class Watcher;
  using ServingStatus = grpc::health::v1::HealthCheckResponse::ServingStatus;

  ServingStatus StatusOf(const std::string& service) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Sends every Watch stream its service's status; with `last`, each ends after it.
  void TellWatchers(bool last) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Forget(Watcher* watcher);
  // serving_ changed: the gauge follows.
  void Export() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::vector<std::string> services_;
  prometheus::Gauge* const serving_gauge_;
  mutable absl::Mutex mu_;
  bool serving_ ABSL_GUARDED_BY(mu_) = false;
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
  absl::flat_hash_set<Watcher*> watchers_ ABSL_GUARDED_BY(mu_);
};

}  // namespace emb::service

#endif  // EMB_SERVICE_RPC_HEALTH_SERVICE_H_
