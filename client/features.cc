#include "client/features.h"

#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "proto/convert/data_type_proto.h"

namespace emb::client {
namespace pb = embedding::v1;

namespace {

std::vector<float> Widen(const std::string& bytes, DataType dtype, size_t first, size_t count) {
  std::vector<float> out(count);
  const size_t element = ElementSize(dtype);
  const char* at = bytes.data() + first * element;
  for (size_t i = 0; i < count; ++i, at += element) {
    if (dtype == DataType::kFloat32) {
      std::memcpy(&out[i], at, sizeof(float));
    } else {
      uint16_t bits = 0;
      std::memcpy(&bits, at, sizeof(bits));
      out[i] = dtype == DataType::kFloat16 ? HalfToFloat(bits) : BFloat16ToFloat(bits);
    }
  }
  return out;
}

}  // namespace

std::vector<float> FeaturesResult::PooledRow(size_t f, int64_t sample) const {
  const Feature& feature = features.at(f);
  return Widen(pooled, dtype, static_cast<size_t>(sample * pooled_width + feature.pooled_column),
               static_cast<size_t>(feature.dim));
}

std::vector<float> FeaturesResult::Row(size_t f, int64_t row) const {
  const Feature& feature = features.at(f);
  return Widen(feature.embeddings, dtype, static_cast<size_t>(row * feature.dim),
               static_cast<size_t>(feature.dim));
}

void ToLookUpFeaturesRequest(int64_t batch_size, absl::Span<const FeatureSpec> features,
                             std::optional<DataType> dtype, pb::LookUpFeaturesRequest* out) {
  out->Clear();
  out->set_batch_size(batch_size);
  out->set_dtype(ToProto(dtype));
  for (const FeatureSpec& spec : features) {
    pb::Feature* f = out->add_features();
    f->set_name(spec.name);
    f->set_table(spec.table);
    f->mutable_ids()->Add(spec.ids.begin(), spec.ids.end());
    f->mutable_lengths()->Add(spec.lengths.begin(), spec.lengths.end());
    f->mutable_offsets()->Add(spec.offsets.begin(), spec.offsets.end());
    f->mutable_weights()->Add(spec.weights.begin(), spec.weights.end());
    f->set_pooling(static_cast<pb::Pooling>(spec.pooling));
  }
}

absl::StatusOr<FeaturesResult> FromLookUpFeaturesResponse(pb::LookUpFeaturesResponse* response) {
  const std::optional<DataType> dtype = FromProto(response->dtype());
  if (!dtype.has_value() || !IsValueType(*dtype)) {
    return absl::InternalError(
        absl::StrCat("server answered with dtype ", response->dtype(), ", not a value type"));
  }
  FeaturesResult result;
  result.dtype = *dtype;
  result.batch_size = response->batch_size();
  result.pooled_width = response->pooled_width();
  const uint64_t element = ElementSize(result.dtype);
  if (result.batch_size < 0 || result.pooled_width < 0 ||
      response->pooled().size() !=
          static_cast<uint64_t>(result.batch_size) * result.pooled_width * element) {
    return absl::InternalError(absl::StrCat("server answered ", response->pooled().size(),
                                            " pooled bytes for ", result.batch_size, " rows of ",
                                            result.pooled_width, " elements"));
  }
  result.pooled = std::move(*response->mutable_pooled());
  for (pb::FeatureAnswer& a : *response->mutable_features()) {
    const bool fits =
        a.dim() > 0 &&
        (a.pooled() ? a.pooled_column() >= 0 && a.pooled_column() + a.dim() <= result.pooled_width
                    : a.embeddings().size() % (a.dim() * element) == 0);
    if (!fits) {
      return absl::InternalError(absl::StrCat("server answered feature '", a.name(), "' with dim ",
                                              a.dim(), " that its bytes do not fit"));
    }
    result.features.push_back(FeaturesResult::Feature{std::move(*a.mutable_name()), a.dim(),
                                                      a.pooled(), a.pooled_column(),
                                                      std::move(*a.mutable_embeddings())});
  }
  return result;
}

}  // namespace emb::client
