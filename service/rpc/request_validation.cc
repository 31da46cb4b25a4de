#include "service/rpc/request_validation.h"

#include <limits>
#include <optional>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "proto/convert/data_type_proto.h"
#include "service/common/status_macros.h"
#include "service/rpc/grpc_status.h"

namespace emb::service {

namespace {

// OK when every id is in [0, rows); else the first that is not, named as LookUp names it.
absl::Status CheckIds(const google::protobuf::RepeatedField<int64_t>& ids,
                      const RequestTable& table, absl::string_view* reject_reason) {
  for (int i = 0; i < ids.size(); ++i) {
    const int64_t id = ids.Get(i);
    if (static_cast<uint64_t>(id) < static_cast<uint64_t>(table.rows)) {
      continue;
    }
    if (id < 0) {
      *reject_reason = kRejectNegativeId;
      return absl::InvalidArgumentError(absl::StrCat("ids[", i, "] = ", id, " is negative"));
    }
    *reject_reason = kRejectOutOfRange;
    return absl::OutOfRangeError(absl::StrCat("ids[", i, "] = ", id, " is out of range for table '",
                                              table.name, "' with ", table.rows,
                                              " rows (valid: 0..", table.rows - 1, ")"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<DataType> ValidateLookUpRequest(const embedding::v1::LookUpRequest& request,
                                               const RequestTable& table, int64_t max_request_ids,
                                               int64_t max_response_bytes,
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
  DataType out_type = table.dtype;
  if (request.dtype() != embedding::v1::DATA_TYPE_UNSPECIFIED) {
    const std::optional<DataType> asked = FromProto(request.dtype());
    if (!asked.has_value()) {
      return reject(kRejectBadDtype, absl::InvalidArgumentError(absl::StrCat(
                                         "dtype ", static_cast<int>(request.dtype()),
                                         " is not a DataType (use FLOAT32, FLOAT16 or BFLOAT16)")));
    }
    out_type = *asked;
  }
  // n x dim x the element size, which a wide enough table takes past int64 (found by fuzzing).
  int64_t answer_bytes;
  const bool overflows =
      __builtin_mul_overflow(n, table.dim, &answer_bytes) ||
      __builtin_mul_overflow(answer_bytes, static_cast<int64_t>(ElementSize(out_type)),
                             &answer_bytes);
  if (overflows || answer_bytes > max_response_bytes) {
    return reject(kRejectAnswerTooLarge,
                  absl::InvalidArgumentError(absl::StrCat(
                      "the answer would be ",
                      overflows ? absl::StrCat("over ", std::numeric_limits<int64_t>::max())
                                : absl::StrCat(answer_bytes),
                      " bytes (", n, " ids x ", table.dim, " x ", ElementSize(out_type),
                      " bytes), over the limit of ", max_response_bytes,
                      " bytes (--max_response_bytes); split the request")));
  }
  RETURN_IF_ERROR(CheckIds(request.ids(), table, reject_reason));
  return out_type;
}

absl::StatusOr<DataType> ValidateUpdateRowsRequest(const embedding::v1::UpdateRowsRequest& request,
                                                   const RequestTable& table) {
  DataType rows_type = table.dtype;
  if (request.dtype() != embedding::v1::DATA_TYPE_UNSPECIFIED) {
    const std::optional<DataType> given = FromProto(request.dtype());
    if (!given.has_value()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "dtype ", static_cast<int>(request.dtype()),
          " is not a DataType (use FLOAT32, FLOAT16 or BFLOAT16, or leave it unset for the "
          "table's own type)"));
    }
    rows_type = *given;
  }
  // A message is bounded by the admin port's receive limit, so this does not overflow.
  const auto n = static_cast<uint64_t>(request.ids_size());
  const uint64_t row_bytes = static_cast<uint64_t>(table.dim) * ElementSize(rows_type);
  if (request.rows().size() != n * row_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rows hold ", request.rows().size(), " bytes, but ", n, " ids of table '", table.name,
        "' (dim ", table.dim, ") in ", DataTypeName(rows_type), " take ", n * row_bytes));
  }
  absl::string_view reason;
  RETURN_IF_ERROR(CheckIds(request.ids(), table, &reason));
  return rows_type;
}

}  // namespace emb::service
