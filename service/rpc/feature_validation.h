// The checks a LookUpFeaturesRequest passes before any of it is queued: the batch, the number of
// features and ids against the server's limits, and each feature as the LookUp of its table would
// be checked (PlanLookUp), with its jagged bags against the batch. Each message names the feature
// (its index and name) and its table. A pure function, so thread-safe; EmbeddingServiceImpl calls
// it on the gRPC thread, and tests call it on their own.
#ifndef EMB_SERVICE_RPC_FEATURE_VALIDATION_H_
#define EMB_SERVICE_RPC_FEATURE_VALIDATION_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "embedding/v1/embedding_service.pb.h"
#include "kernels/data_type.h"
#include "service/rpc/request_validation.h"

namespace emb::service {

struct FeatureLimits {
  int64_t max_features = 1024;  // features in one call (--max_features_per_call)
  int64_t max_call_ids = int64_t{1}
                         << 20;     // ids of all features of one call (--max_feature_call_ids)
  int64_t max_feature_ids = 65536;  // ids of one feature (--max_request_ids, as a LookUp)
  int64_t max_response_bytes = 128 << 20;  // the whole answer (--max_response_bytes)
};

// One feature of a valid call, as the LookUp of its table that answers it.
struct PlannedFeature {
  size_t table = 0;  // the index of its table in PlanFeatures' `tables`
  // Its ids, bags and weights (moved out of the request's Feature) as one LookUp: one bag per
  // sample when pooled, else one answer row per id.
  embedding::v1::LookUpRequest lookup;
  LookUpPlan plan;
  int64_t dim = 0;
  int64_t pooled_column = 0;  // pooled: its first element in each pooled row
};

// How a valid LookUpFeaturesRequest is answered.
struct FeaturesPlan {
  DataType out_type = DataType::kFloat32;
  int64_t batch_size = 0;
  int64_t pooled_width = 0;  // elements per pooled row: the pooled features' dims summed
  std::vector<PlannedFeature> features;
  int64_t ids = 0;          // of every feature
  size_t answer_bytes = 0;  // the pooled rows and every unpooled feature's rows
};

// Why a call was refused, for embedding_rejected_ids_total: the table it is counted against (the
// feature's, or the default table's for a fault of the whole call), the reason (empty: not
// counted, as a LookUp of an unknown table is not) and the ids.
struct FeatureReject {
  size_t table = 0;
  absl::string_view reason;
  int64_t ids = 0;
};

// How messages name feature `i` of a call on `table`: "feature 3 'user_id', table 'items'".
std::string FeatureText(int i, const embedding::v1::Feature& feature, absl::string_view table);

// How `request` is answered from `tables` (the default table first) within `limits`, moving each
// feature's ids, bags and weights out of `request`. Otherwise the status (INVALID_ARGUMENT,
// OUT_OF_RANGE, or NOT_FOUND for an unknown table) naming the feature, its table and the limit,
// and *reject set.
absl::StatusOr<FeaturesPlan> PlanFeatures(embedding::v1::LookUpFeaturesRequest& request,
                                          absl::Span<const RequestTable> tables,
                                          const FeatureLimits& limits, FeatureReject* reject);

}  // namespace emb::service

#endif  // EMB_SERVICE_RPC_FEATURE_VALIDATION_H_
