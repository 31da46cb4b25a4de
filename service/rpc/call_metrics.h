// The gRPC interceptor that records every call the server handles in Metrics: grpc_server_*
// (started, handled by code, handling time) and embedding_request_duration_seconds, and keeps the
// count of calls in progress (ActiveCalls) that shutdown waits on.
#ifndef EMB_SERVICE_RPC_CALL_METRICS_H_
#define EMB_SERVICE_RPC_CALL_METRICS_H_

#include <memory>

#include "grpcpp/support/server_interceptor.h"
#include "service/metrics/metrics.h"
#include "service/rpc/active_calls.h"

namespace emb::service {

// Give it to ServerBuilder::experimental().SetInterceptorCreators(); `metrics` and `active_calls`
// must outlive the server.
std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> MakeCallMetricsFactory(
    Metrics* metrics, ActiveCalls* active_calls);

}  // namespace emb::service

#endif  // EMB_SERVICE_RPC_CALL_METRICS_H_
