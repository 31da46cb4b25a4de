// LookUpFeatures: one call of many features (service/rpc/feature_validation.h checks it). Each
// feature goes to its table's Batcher as one LookUp would, so that the features of concurrent
// calls on a table share its batches; when every feature is answered, their rows are laid out as
// the call's answer (the pooled features side by side in one row per sample, each unpooled
// feature's rows in its own block) and the call is finished, OK only when every feature is. A
// call holds its answer's bytes of the bound on unsent answers from admission until gRPC has sent
// it. Never blocks: the handler returns once the features are queued (or the call waits for
// room), and the last feature's batcher thread finishes the call.
#ifndef EMB_SERVICE_RPC_FEATURES_CALL_H_
#define EMB_SERVICE_RPC_FEATURES_CALL_H_

#include <vector>

#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "service/common/clock.h"
#include "service/metrics/metrics.h"
#include "service/rpc/embedding_service.h"
#include "service/rpc/feature_validation.h"
#include "service/rpc/unsent_answers.h"

namespace emb::service {

// What a LookUpFeatures call is served with; each pointer outlives every call.
struct FeaturesService {
  FeatureLimits limits;
  absl::Duration max_call_time;  // a call's longest stay without (or past) its client's deadline
  Metrics* metrics = nullptr;
  Clock* clock = nullptr;
  UnsentAnswers* unsent_answers = nullptr;
};

// Serves the call whose request bytes are `request_bytes` from `tables` (loaded: not nullptr) and
// writes the serialized LookUpFeaturesResponse to `response_bytes`; the call's reactor.
grpc::ServerUnaryReactor* StartLookUpFeatures(grpc::CallbackServerContext* ctx,
                                              const grpc::ByteBuffer& request_bytes,
                                              grpc::ByteBuffer* response_bytes,
                                              std::vector<ServedTable>* tables,
                                              const FeaturesService& service);

}  // namespace emb::service

#endif  // EMB_SERVICE_RPC_FEATURES_CALL_H_
