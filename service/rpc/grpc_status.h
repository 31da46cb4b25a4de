// absl::Status -> grpc::Status. Both code sets are google.rpc.Code, so the numbers carry over.
#ifndef EMB_SERVICE_RPC_GRPC_STATUS_H_
#define EMB_SERVICE_RPC_GRPC_STATUS_H_

#include <string>

#include "absl/status/status.h"
#include "grpcpp/support/status.h"

namespace emb::service {

inline grpc::Status ToGrpcStatus(const absl::Status& s) {
  if (s.ok()) {
    return grpc::Status::OK;
  }
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()));
}

}  // namespace emb::service

#endif  // EMB_SERVICE_RPC_GRPC_STATUS_H_
