// The one conversion between the kernels' DataType and the API's embedding.v1.DataType, for the
// server's request handling and for the clients. The enums share their values (checked below), so
// each way is a cast plus a validity check.
#ifndef EMB_PROTO_CONVERT_DATA_TYPE_PROTO_H_
#define EMB_PROTO_CONVERT_DATA_TYPE_PROTO_H_

#include <optional>

#include "embedding/v1/embedding_service.pb.h"
#include "kernels/data_type.h"

namespace emb {

static_assert(static_cast<int>(DataType::kFloat32) == embedding::v1::DATA_TYPE_FLOAT32);
static_assert(static_cast<int>(DataType::kFloat16) == embedding::v1::DATA_TYPE_FLOAT16);
static_assert(static_cast<int>(DataType::kBFloat16) == embedding::v1::DATA_TYPE_BFLOAT16);
static_assert(static_cast<int>(DataType::kInt8Rowwise) == embedding::v1::DATA_TYPE_INT8_ROWWISE);
static_assert(static_cast<int>(DataType::kInt4Rowwise) == embedding::v1::DATA_TYPE_INT4_ROWWISE);
static_assert(embedding::v1::DataType_MAX == embedding::v1::DATA_TYPE_INT4_ROWWISE,
              "a DataType was added to the API: add it to kernels/data_type.h too");

inline embedding::v1::DataType ToProto(DataType t) {
  return static_cast<embedding::v1::DataType>(t);
}

// No type: DATA_TYPE_UNSPECIFIED (in a request: "the table's own type").
inline embedding::v1::DataType ToProto(std::optional<DataType> t) {
  return t.has_value() ? ToProto(*t) : embedding::v1::DATA_TYPE_UNSPECIFIED;
}

// A wire value (of a request, an answer or a table description) as a DataType; nullopt for
// DATA_TYPE_UNSPECIFIED and for any value this build does not know (a newer peer's, or garbage).
// Quantized types are table types: an answer's or a request's type must be IsValueType.
inline std::optional<DataType> FromProto(int wire_value) {
  const auto t = static_cast<DataType>(wire_value);
  return IsDataType(t) ? std::optional<DataType>(t) : std::nullopt;
}

}  // namespace emb

#endif  // EMB_PROTO_CONVERT_DATA_TYPE_PROTO_H_
