#include "service/rpc/request_validation.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "proto/convert/data_type_proto.h"
#include "service/common/status_macros.h"
#include "service/common/update_sequence.h"
#include "service/rpc/grpc_status.h"

namespace emb::service {

namespace {

// OK when the table holds every id; else the first that it does not, named as LookUp names it.
absl::Status CheckIds(const google::protobuf::RepeatedField<int64_t>& ids,
                      const RequestTable& table, absl::string_view* reject_reason) {
  for (int i = 0; i < ids.size(); ++i) {
    const int64_t id = ids.Get(i);
    if (table.ids.Contains(id)) {
      continue;
    }
    if (id < 0) {
      *reject_reason = kRejectNegativeId;
      return absl::InvalidArgumentError(absl::StrCat("ids[", i, "] = ", id, " is negative"));
    }
    *reject_reason = kRejectOutOfRange;
    if (table.shard_count > 0) {
      return absl::OutOfRangeError(
          absl::StrCat("ids[", i, "] = ", id, " is outside shard ", table.shard_index, "/",
                       table.shard_count, " of table '", table.name, "', which holds rows ",
                       table.ids.first(), "..", table.ids.last(), " of ", table.ids.whole(),
                       (id < table.ids.whole() ? " (another shard holds it)" : "")));
    }
    return absl::OutOfRangeError(absl::StrCat("ids[", i, "] = ", id, " is out of range for table '",
                                              table.name, "' with ", table.ids.count(),
                                              " rows (valid: 0..", table.ids.last(), ")"));
  }
  return absl::OkStatus();
}

// OK when every element of `rows` (len(ids) rows of table.dim elements of `rows_type`) is finite
// and stays finite in the table's type; else INVALID_ARGUMENT naming the first that is not, by
// its row, id and element. A NaN or infinite element, or one that the table's float16 or
// bfloat16 rounds to infinity, would be served to every later lookup of its row, and would poison
// every pooled bag that holds it.
absl::Status CheckRowsFinite(const embedding::v1::UpdateRowsRequest& request, DataType rows_type,
                             const RequestTable& table) {
  const size_t size = ElementSize(rows_type);
  const auto dim = static_cast<size_t>(table.dim);
  const std::string& rows = request.rows();
  const size_t count = rows.size() / size;
  for (size_t e = 0; e < count; ++e) {
    const char* at = rows.data() + e * size;
    float value = 0;
    if (rows_type == DataType::kFloat32) {
      std::memcpy(&value, at, sizeof(value));
    } else {
      uint16_t bits = 0;
      std::memcpy(&bits, at, sizeof(bits));
      value = rows_type == DataType::kFloat16 ? HalfToFloat(bits) : BFloat16ToFloat(bits);
    }
    bool finite = std::isfinite(value);
    const bool overflows =
        finite &&
        ((table.dtype == DataType::kFloat16 && (FloatToHalf(value) & 0x7fffu) == 0x7c00u) ||
         (table.dtype == DataType::kBFloat16 && (FloatToBFloat16(value) & 0x7fffu) == 0x7f80u));
    if (finite && !overflows) {
      continue;
    }
    const size_t row = e / dim;
    return absl::InvalidArgumentError(absl::StrCat(
        "rows[", row, "] (id ", request.ids(static_cast<int>(row)), "), element ", e % dim, " is ",
        std::isnan(value) ? "NaN"
        : !finite         ? (value > 0 ? "+infinity" : "-infinity")
                          : absl::StrCat(value, ", which the table's ", DataTypeName(table.dtype),
                                         " rounds to infinity"),
        ": rows must be finite numbers the table's type can hold"));
  }
  return absl::OkStatus();
}

}  // namespace

namespace {

using embedding::v1::LookUpRequest;

// The bags of a pooled request as offsets (and the answer's shape before its dim), or why they
// are malformed.
absl::Status PlanBags(const LookUpRequest& request, int64_t max_request_ids, LookUpPlan* plan) {
  const int64_t n = request.ids_size();
  const bool rank1 =
      request.shape_size() == 0 || (request.shape_size() == 1 && request.shape(0) == n);
  if (request.offsets_size() > 0 && request.lengths_size() > 0) {
    return absl::InvalidArgumentError("give the bags as offsets or as lengths, not both");
  }
  if ((request.offsets_size() > 0 || request.lengths_size() > 0) && !rank1) {
    return absl::InvalidArgumentError(
        absl::StrCat("with offsets or lengths the ids are one flat list, but shape is ",
                     ShapeText(request.shape()), "; leave shape empty or [", n, "]"));
  }
  std::vector<int64_t>& offsets = plan->offsets;
  if (request.offsets_size() > 0 || request.lengths_size() > 0) {
    RETURN_IF_ERROR(BagOffsets(request.offsets(), request.lengths(), n, &offsets));
  } else {
    // The shape's last axis is the bag: bags of equal length, as embedding_bag takes a 2-D input.
    const int64_t length = request.shape_size() > 0 ? request.shape(request.shape_size() - 1) : n;
    int64_t bags = 1;
    for (int i = 0; i + 1 < request.shape_size(); ++i) {
      if (__builtin_mul_overflow(bags, request.shape(i), &bags) || bags > max_request_ids) {
        return absl::InvalidArgumentError(
            absl::StrCat("shape ", ShapeText(request.shape()), " makes over ", max_request_ids,
                         " bags, the limit of rows per request (--max_request_ids)"));
      }
    }
    offsets.resize(static_cast<size_t>(bags) + 1);
    for (int64_t b = 0; b <= bags; ++b) {
      offsets[b] = b * length;
    }
    plan->shape.assign(request.shape().begin(),
                       request.shape().end() - (request.shape_size() > 0 ? 1 : 0));
    return absl::OkStatus();
  }
  plan->shape = {static_cast<int64_t>(offsets.size()) - 1};
  return absl::OkStatus();
}

}  // namespace

absl::Status BagOffsets(const google::protobuf::RepeatedField<int64_t>& given_offsets,
                        const google::protobuf::RepeatedField<int64_t>& lengths, int64_t n,
                        std::vector<int64_t>* offsets_out) {
  std::vector<int64_t>& offsets = *offsets_out;
  offsets.clear();
  if (given_offsets.size() > 0) {
    const auto& o = given_offsets;
    if (o.Get(0) != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("offsets[0] = ", o.Get(0), "; the first offset must be 0"));
    }
    for (int i = 1; i < o.size(); ++i) {
      if (o.Get(i) < o.Get(i - 1)) {
        return absl::InvalidArgumentError(
            absl::StrCat("offsets[", i, "] = ", o.Get(i), " is below offsets[", i - 1,
                         "] = ", o.Get(i - 1), "; offsets never decrease"));
      }
      if (o.Get(i) > n) {
        return absl::InvalidArgumentError(
            absl::StrCat("offsets[", i, "] = ", o.Get(i), " is past the end of ids (", n, " ids)"));
      }
    }
    if (o.Get(o.size() - 1) != n) {
      return absl::InvalidArgumentError(
          absl::StrCat("the last offset, offsets[", o.size() - 1, "] = ", o.Get(o.size() - 1),
                       ", must be len(ids) = ", n, " (bags + 1 offsets, as FBGEMM takes them)"));
    }
    offsets.assign(o.begin(), o.end());
  } else {
    offsets.reserve(static_cast<size_t>(lengths.size()) + 1);
    offsets.push_back(0);
    for (int i = 0; i < lengths.size(); ++i) {
      const int64_t len = lengths.Get(i);
      if (len < 0 || len > n - offsets.back()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "lengths[", i, "] = ", len,
            len < 0 ? " is negative" : absl::StrCat(": the lengths so far exceed len(ids) = ", n)));
      }
      offsets.push_back(offsets.back() + len);
    }
    if (offsets.back() != n) {
      return absl::InvalidArgumentError(
          absl::StrCat("lengths sum to ", offsets.back(), " but ids has ", n));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<LookUpPlan> PlanLookUp(const LookUpRequest& request, const RequestTable& table,
                                      int64_t max_request_ids, int64_t max_response_bytes,
                                      absl::string_view* reject_reason) {
  const int64_t n = request.ids_size();
  auto reject = [reject_reason](absl::string_view reason, absl::Status status) {
    *reject_reason = reason;
    return status;
  };
  // The shape: non-negative dims whose product, computed without overflow, is len(ids).
  int64_t product = 1;
  for (int i = 0; i < request.shape_size(); ++i) {
    const int64_t d = request.shape(i);
    if (d < 0) {
      return reject(kRejectBadShape, absl::InvalidArgumentError(
                                         absl::StrCat("shape[", i, "] = ", d, " is negative")));
    }
    if (__builtin_mul_overflow(product, d, &product)) {
      return reject(kRejectBadShape,
                    absl::InvalidArgumentError(absl::StrCat("shape ", ShapeText(request.shape()),
                                                            " overflows int64 at shape[", i, "]")));
    }
  }
  if (request.shape_size() > 0 && product != n) {
    return reject(kRejectBadShape, absl::InvalidArgumentError(
                                       absl::StrCat("shape ", ShapeText(request.shape()), " holds ",
                                                    product, " ids but ids has ", n)));
  }
  if (n > max_request_ids) {
    return reject(kRejectTooManyIds,
                  absl::InvalidArgumentError(
                      absl::StrCat(n, " ids exceed the limit of ", max_request_ids,
                                   " ids per request (--max_request_ids); split the request")));
  }
  LookUpPlan plan;
  // A quantized table answers float32 unless asked otherwise.
  plan.out_type = IsValueType(table.dtype) ? table.dtype : DataType::kFloat32;
  if (request.dtype() != embedding::v1::DATA_TYPE_UNSPECIFIED) {
    const std::optional<DataType> asked = FromProto(request.dtype());
    if (!asked.has_value() || !IsValueType(*asked)) {
      return reject(kRejectBadDtype,
                    absl::InvalidArgumentError(
                        absl::StrCat("dtype ", static_cast<int>(request.dtype()),
                                     asked.has_value() ? " is a table type: answers are dequantized"
                                                       : " is not a DataType",
                                     " (use FLOAT32, FLOAT16 or BFLOAT16)")));
    }
    plan.out_type = *asked;
  }
  // The bags.
  const auto pooling = request.pooling();
  if (pooling != embedding::v1::POOLING_UNSPECIFIED && pooling != embedding::v1::POOLING_SUM &&
      pooling != embedding::v1::POOLING_MEAN) {
    return reject(kRejectBadBags,
                  absl::InvalidArgumentError(absl::StrCat(
                      "pooling ", static_cast<int>(pooling),
                      " is not a Pooling (use POOLING_SUM or POOLING_MEAN, or leave it unset)")));
  }
  plan.pooled = pooling != embedding::v1::POOLING_UNSPECIFIED;
  plan.mean = pooling == embedding::v1::POOLING_MEAN;
  if (!plan.pooled) {
    if (request.offsets_size() > 0 || request.lengths_size() > 0 || request.weights_size() > 0) {
      return reject(kRejectBadBags,
                    absl::InvalidArgumentError(
                        "offsets, lengths and weights need pooling (POOLING_SUM or POOLING_MEAN)"));
    }
    plan.shape.assign(request.shape().begin(), request.shape().end());
    if (plan.shape.empty()) {
      plan.shape.push_back(n);
    }
    plan.answer_rows = n;
  } else {
    if (request.weights_size() > 0 && plan.mean) {
      return reject(kRejectBadBags,
                    absl::InvalidArgumentError("weights need POOLING_SUM (a weighted sum), not "
                                               "POOLING_MEAN, as PyTorch's per_sample_weights do"));
    }
    if (request.weights_size() > 0 && request.weights_size() != n) {
      return reject(kRejectBadBags, absl::InvalidArgumentError(absl::StrCat(
                                        "weights has ", request.weights_size(), " values for ", n,
                                        " ids; give one weight per id, or none")));
    }
    for (int i = 0; i < request.weights_size(); ++i) {
      if (const float w = request.weights(i); !std::isfinite(w)) {
        return reject(kRejectBadBags, absl::InvalidArgumentError(absl::StrCat(
                                          "weights[", i, "] = ",
                                          std::isnan(w) ? "NaN"
                                          : w > 0       ? "+inf"
                                                        : "-inf",
                                          " (for ids[", i, "] = ", request.ids(i),
                                          ") is not finite: weights must be finite numbers")));
      }
    }
    if (absl::Status s = PlanBags(request, max_request_ids, &plan); !s.ok()) {
      return reject(kRejectBadBags, s);
    }
    plan.answer_rows = static_cast<int64_t>(plan.offsets.size()) - 1;
    if (plan.answer_rows > max_request_ids) {
      return reject(kRejectTooManyIds,
                    absl::InvalidArgumentError(absl::StrCat(
                        plan.answer_rows, " bags exceed the limit of ", max_request_ids,
                        " rows per request (--max_request_ids); split the request")));
    }
  }
  plan.shape.push_back(table.dim);
  // rows x dim x the element size, which a wide enough table takes past int64 (found by fuzzing).
  const int64_t rows = plan.answer_rows;
  const DataType out_type = plan.out_type;
  int64_t answer_bytes;
  const bool overflows =
      __builtin_mul_overflow(rows, table.dim, &answer_bytes) ||
      __builtin_mul_overflow(answer_bytes, static_cast<int64_t>(ElementSize(out_type)),
                             &answer_bytes);
  if (overflows || answer_bytes > max_response_bytes) {
    return reject(kRejectAnswerTooLarge,
                  absl::InvalidArgumentError(absl::StrCat(
                      "the answer would be ",
                      overflows ? absl::StrCat("over ", std::numeric_limits<int64_t>::max())
                                : absl::StrCat(answer_bytes),
                      " bytes (", rows, plan.pooled ? " bags x " : " ids x ", table.dim, " x ",
                      ElementSize(out_type), " bytes), over the limit of ", max_response_bytes,
                      " bytes (--max_response_bytes); split the request")));
  }
  RETURN_IF_ERROR(CheckIds(request.ids(), table, reject_reason));
  return plan;
}

absl::StatusOr<DataType> ValidateLookUpRequest(const embedding::v1::LookUpRequest& request,
                                               const RequestTable& table, int64_t max_request_ids,
                                               int64_t max_response_bytes,
                                               absl::string_view* reject_reason) {
  ASSIGN_OR_RETURN(LookUpPlan plan,
                   PlanLookUp(request, table, max_request_ids, max_response_bytes, reject_reason));
  return plan.out_type;
}

absl::StatusOr<DataType> ValidateUpdateRowsRequest(const embedding::v1::UpdateRowsRequest& request,
                                                   const RequestTable& table) {
  // A quantized table takes float32 rows unless told otherwise (it quantizes them on arrival).
  DataType rows_type = IsValueType(table.dtype) ? table.dtype : DataType::kFloat32;
  if (request.dtype() != embedding::v1::DATA_TYPE_UNSPECIFIED) {
    const std::optional<DataType> given = FromProto(request.dtype());
    if (!given.has_value() || !IsValueType(*given)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "dtype ", static_cast<int>(request.dtype()),
          given.has_value() ? " is a table type: rows are given as values, and a quantized table "
                              "quantizes them"
                            : " is not a DataType",
          " (use FLOAT32, FLOAT16 or BFLOAT16, or leave it unset for the table's own type, "
          "float32 for a quantized table)"));
    }
    rows_type = *given;
  }
  // A message is bounded by the admin port's receive limit, so this does not overflow.
  const auto n = static_cast<uint64_t>(request.ids_size());
  const uint64_t row_bytes = RowBytes(rows_type, table.dim);
  if (request.rows().size() != n * row_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rows hold ", request.rows().size(), " bytes, but ", n, " ids of table '", table.name,
        "' (dim ", table.dim, ") in ", DataTypeName(rows_type), " take ", n * row_bytes));
  }
  if (request.sequence() >= kSequenceLimit) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sequence ", request.sequence(), " is not below ", kSequenceLimit,
        " (2^62), the limit of an update's sequence, which keeps room for the updates after it; "
        "number the messages from the table's sequence (ListTables) upwards"));
  }
  absl::string_view reason;
  RETURN_IF_ERROR(CheckIds(request.ids(), table, &reason));
  RETURN_IF_ERROR(CheckRowsFinite(request, rows_type, table));
  return rows_type;
}

}  // namespace emb::service
