#include "service/rpc/call_metrics.h"

#include <chrono>

namespace emb::service {
namespace {

using grpc::experimental::ServerRpcInfo;

const char* TypeName(ServerRpcInfo::Type t) {
  switch (t) {
    case ServerRpcInfo::Type::UNARY:
      return "unary";
    case ServerRpcInfo::Type::CLIENT_STREAMING:
      return "client_stream";
    case ServerRpcInfo::Type::SERVER_STREAMING:
      return "server_stream";
    case ServerRpcInfo::Type::BIDI_STREAMING:
      return "bidi_stream";
  }
  return "unknown";
}

// Records one call: started (and in progress) at creation, handled with its code when the status
// is sent, done when gRPC destroys it with the call.
class CallMetricsInterceptor final : public grpc::experimental::Interceptor {
 public:
  CallMetricsInterceptor(Metrics* metrics, ActiveCalls* active_calls,
                         Metrics::MethodMetrics* method)
      : metrics_(metrics),
        active_calls_(active_calls),
        method_(method),
        start_(std::chrono::steady_clock::now()) {
    metrics_->CallStarted(*method_);
    active_calls_->Started();
  }

  ~CallMetricsInterceptor() override { active_calls_->Done(); }

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::PRE_SEND_STATUS)) {
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
      metrics_->RecordHandled(*method_, methods->GetSendStatus().error_code(), seconds);
    }
    methods->Proceed();
  }

 private:
  Metrics* metrics_;
  ActiveCalls* active_calls_;
  Metrics::MethodMetrics* method_;
  std::chrono::steady_clock::time_point start_;
};

class CallMetricsFactory final : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  CallMetricsFactory(Metrics* metrics, ActiveCalls* active_calls)
      : metrics_(metrics), active_calls_(active_calls) {}

  grpc::experimental::Interceptor* CreateServerInterceptor(ServerRpcInfo* info) override {
    const char* method = info->method();
    return new CallMetricsInterceptor(
        metrics_, active_calls_,
        &metrics_->ForMethod(method != nullptr ? method : "", TypeName(info->type())));
  }

 private:
  Metrics* metrics_;
  ActiveCalls* active_calls_;
};

}  // namespace

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> MakeCallMetricsFactory(
    Metrics* metrics, ActiveCalls* active_calls) {
  return std::make_unique<CallMetricsFactory>(metrics, active_calls);
}

}  // namespace emb::service
