#include "service/rpc/feature_validation.h"

#include <limits>
#include <optional>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "proto/convert/data_type_proto.h"
#include "service/common/status_macros.h"
#include "service/rpc/grpc_status.h"

namespace emb::service {
namespace {

using embedding::v1::Feature;
using embedding::v1::LookUpFeaturesRequest;
using embedding::v1::LookUpRequest;

// `status` with the feature named in front of its message.
absl::Status ForFeature(const std::string& feature, const absl::Status& status) {
  return absl::Status(status.code(), absl::StrCat(feature, ": ", status.message()));
}

// The index of the table `name` names in `tables` (empty: the default, the first), else NOT_FOUND
// naming the feature.
absl::StatusOr<size_t> FindTable(absl::Span<const RequestTable> tables, int i,
                                 const Feature& feature) {
  if (feature.table().empty()) {
    return 0;
  }
  for (size_t t = 0; t < tables.size(); ++t) {
    if (tables[t].name == feature.table()) {
      return t;
    }
  }
  std::string names;
  for (const RequestTable& t : tables) {
    absl::StrAppend(&names, names.empty() ? "" : ", ", t.name);
  }
  return absl::NotFoundError(absl::StrCat(FeatureText(i, feature, feature.table()),
                                          ": unknown table; this server has: ", names));
}

// Checks the feature's bags against the batch (one per sample) and moves the feature into the
// LookUp that answers it: pooled, its bags as offsets; unpooled, its ids alone.
absl::Status ToLookUp(Feature& feature, int64_t batch_size, LookUpRequest* lookup) {
  const int64_t n = feature.ids_size();
  if (feature.lengths_size() > 0 && feature.lengths_size() != batch_size) {
    return absl::InvalidArgumentError(absl::StrCat("lengths has ", feature.lengths_size(),
                                                   " values; give one per sample (batch_size ",
                                                   batch_size, ")"));
  }
  if (feature.offsets_size() > 0 && feature.offsets_size() != batch_size + 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "offsets has ", feature.offsets_size(), " values; give batch_size + 1 = ", batch_size + 1));
  }
  if (feature.offsets_size() > 0 && feature.lengths_size() > 0) {
    return absl::InvalidArgumentError("give the bags as offsets or as lengths, not both");
  }
  const bool pooled = feature.pooling() != embedding::v1::POOLING_UNSPECIFIED;
  if (feature.offsets_size() == 0 && feature.lengths_size() == 0) {
    if (n != batch_size) {
      return absl::InvalidArgumentError(
          absl::StrCat("without lengths or offsets a feature holds one id per sample, but ids has ",
                       n, " for batch_size ", batch_size));
    }
  } else {
    std::vector<int64_t> offsets;
    RETURN_IF_ERROR(BagOffsets(feature.offsets(), feature.lengths(), n, &offsets));
  }
  if (!pooled && feature.weights_size() > 0) {
    return absl::InvalidArgumentError("weights need pooling (POOLING_SUM)");
  }
  lookup->set_table(feature.table());
  lookup->set_pooling(feature.pooling());
  lookup->mutable_ids()->Swap(feature.mutable_ids());
  lookup->mutable_weights()->Swap(feature.mutable_weights());
  if (pooled) {
    if (feature.offsets_size() == 0 && feature.lengths_size() == 0) {
      lookup->add_shape(batch_size);  // bags of one id: the shape's last axis is the bag
      lookup->add_shape(1);
    } else {
      lookup->mutable_offsets()->Swap(feature.mutable_offsets());
      lookup->mutable_lengths()->Swap(feature.mutable_lengths());
    }
  }
  return absl::OkStatus();
}

}  // namespace

std::string FeatureText(int i, const Feature& feature, absl::string_view table) {
  return absl::StrCat("feature ", i, feature.name().empty() ? "" : " '",
                      feature.name().empty() ? "" : EchoText(feature.name()),
                      feature.name().empty() ? "" : "'", ", table '", EchoText(table), "'");
}

absl::StatusOr<FeaturesPlan> PlanFeatures(LookUpFeaturesRequest& request,
                                          absl::Span<const RequestTable> tables,
                                          const FeatureLimits& limits, FeatureReject* reject) {
  auto refuse = [reject](size_t table, absl::string_view reason, int64_t ids, absl::Status status) {
    *reject = FeatureReject{table, reason, ids};
    return status;
  };
  int64_t all_ids = 0;
  for (const Feature& f : request.features()) {
    all_ids += f.ids_size();  // at most the message's size: no overflow
  }
  if (request.features_size() == 0) {
    return refuse(0, kRejectBadShape, 0, absl::InvalidArgumentError("the call has no features"));
  }
  if (request.features_size() > limits.max_features) {
    return refuse(0, kRejectTooManyIds, all_ids,
                  absl::InvalidArgumentError(absl::StrCat(
                      request.features_size(), " features exceed the limit of ",
                      limits.max_features, " features per call (--max_features_per_call)")));
  }
  if (request.batch_size() < 1) {
    return refuse(0, kRejectBadShape, all_ids,
                  absl::InvalidArgumentError(absl::StrCat("batch_size is ", request.batch_size(),
                                                          "; a batch holds at least 1 sample")));
  }
  if (all_ids > limits.max_call_ids) {
    return refuse(0, kRejectTooManyIds, all_ids,
                  absl::InvalidArgumentError(absl::StrCat(
                      all_ids, " ids in all features exceed the limit of ", limits.max_call_ids,
                      " ids per call (--max_feature_call_ids); split the batch")));
  }
  FeaturesPlan plan;
  plan.batch_size = request.batch_size();
  plan.ids = all_ids;
  if (request.dtype() != embedding::v1::DATA_TYPE_UNSPECIFIED) {
    const std::optional<DataType> asked = FromProto(request.dtype());
    if (!asked.has_value() || !IsValueType(*asked)) {
      return refuse(0, kRejectBadDtype, all_ids,
                    absl::InvalidArgumentError(
                        absl::StrCat("dtype ", static_cast<int>(request.dtype()),
                                     " is not an answer type (use FLOAT32, FLOAT16 or BFLOAT16)")));
    }
    plan.out_type = *asked;
  }
  plan.features.resize(static_cast<size_t>(request.features_size()));
  int64_t answer_bytes = 0;
  for (int i = 0; i < request.features_size(); ++i) {
    Feature& feature = *request.mutable_features(i);
    PlannedFeature& planned = plan.features[static_cast<size_t>(i)];
    const int64_t n = feature.ids_size();
    absl::StatusOr<size_t> table_index = FindTable(tables, i, feature);
    if (!table_index.ok()) {
      return refuse(0, absl::string_view(), n, table_index.status());  // no table to count
    }
    planned.table = *table_index;
    const RequestTable& table = tables[planned.table];
    const std::string name = FeatureText(i, feature, table.name);
    if (absl::Status s = ToLookUp(feature, plan.batch_size, &planned.lookup); !s.ok()) {
      return refuse(planned.table, kRejectBadBags, n, ForFeature(name, s));
    }
    planned.lookup.set_dtype(ToProto(plan.out_type));
    absl::string_view reason;
    absl::StatusOr<LookUpPlan> lookup_plan = PlanLookUp(
        planned.lookup, table, limits.max_feature_ids, limits.max_response_bytes, &reason);
    if (!lookup_plan.ok()) {
      return refuse(planned.table, reason, n, ForFeature(name, lookup_plan.status()));
    }
    planned.plan = *std::move(lookup_plan);
    planned.dim = table.dim;
    if (planned.plan.pooled) {
      planned.pooled_column = plan.pooled_width;
      plan.pooled_width += table.dim;  // dims are bounded by the table sizes: no overflow
    }
    // Each feature's answer is within max_response_bytes (PlanLookUp): the sum does not overflow.
    answer_bytes +=
        planned.plan.answer_rows * table.dim * static_cast<int64_t>(ElementSize(plan.out_type));
    if (answer_bytes > limits.max_response_bytes) {
      return refuse(planned.table, kRejectAnswerTooLarge, all_ids,
                    absl::InvalidArgumentError(
                        absl::StrCat("the answer would be over ", limits.max_response_bytes,
                                     " bytes (--max_response_bytes) by ", name, ", whose ",
                                     planned.plan.answer_rows, " rows of ", table.dim,
                                     " elements bring it to ", answer_bytes, "; split the batch")));
    }
  }
  plan.answer_bytes = static_cast<size_t>(answer_bytes);
  return plan;
}

}  // namespace emb::service
