#include "service/store/embedding_store.h"

#include "absl/container/flat_hash_map.h"
#include "kernels/quantize_rows.h"
#include "service/common/status_macros.h"

namespace emb::service {
namespace {

// Writes one row of an update (dim elements of the value type `rows_type`) as a row of the
// table's type, converted as lookups convert or quantized (kernels/quantize_rows.h).
// INVALID_ARGUMENT naming the table and the row (`index`, its place in the message) for a row a
// quantized table cannot hold (NaN, infinity, or past float16 for int4).
absl::Status EncodeRowOfUpdate(const std::byte* row, DataType rows_type, const TableInfo& table,
                               std::byte* out, size_t index) {
  if (absl::Status s =
          EncodeRows(row, rows_type, 1, table.dim, table.dtype, out, static_cast<int64_t>(index));
      !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("table '", table.name, "' is ", DataTypeName(table.dtype), ": ", s.message()));
  }
  return absl::OkStatus();
}

// The index of each distinct id's last occurrence in `ids`, in the order of those occurrences:
// the rows an update writes when an id is given twice (the last row wins).
std::vector<size_t> LastOccurrences(absl::Span<const int64_t> ids) {
  absl::flat_hash_map<int64_t, size_t> last;
  last.reserve(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    last[ids[i]] = i;
  }
  std::vector<size_t> keep;
  keep.reserve(last.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    if (last[ids[i]] == i) {
      keep.push_back(i);
    }
  }
  return keep;
}

}  // namespace

const char* PlacementName(Placement placement) {
  switch (placement) {
    case Placement::kOneDevice:
      return "one device";
    case Placement::kReplicated:
      return "replicas";
    case Placement::kRowSharded:
      return "rows";
  }
  return "unknown";
}

absl::Status CheckSameShape(const TableInfo& served, int64_t rows, int64_t dim, DataType dtype,
                            absl::string_view origin) {
  if (rows == served.rows && dim == served.dim && dtype == served.dtype) {
    return absl::OkStatus();
  }
  return absl::FailedPreconditionError(absl::StrCat(
      origin, " holds ", rows, " x ", dim, " ", DataTypeName(dtype), " but table '", served.name,
      "' is served as ", served.rows, " x ", served.dim, " ", DataTypeName(served.dtype),
      ": a version of another shape or type needs a restart"));
}

absl::StatusOr<EncodedUpdate> EncodedUpdate::Plan(const TableInfo& table,
                                                  absl::Span<const int64_t> ids, DataType rows_type,
                                                  absl::Span<const std::byte> rows) {
  if (rows.size() != ids.size() * RowBytes(rows_type, table.dim)) {
    return absl::InternalError(absl::StrCat("PrepareRows: ", rows.size(), " bytes of rows for ",
                                            ids.size(), " ids of dim ", table.dim));
  }
  EncodedUpdate update(table, ids, rows_type, rows);
  update.keep_ = LastOccurrences(ids);
  return update;
}

absl::Status EncodedUpdate::Write(int64_t* ids_out, std::byte* rows_out) const {
  const size_t in_row = RowBytes(rows_type_, table_.dim);
  const size_t out_row = RowBytes(table_.dtype, table_.dim);
  for (size_t k = 0; k < keep_.size(); ++k) {
    ids_out[k] = ids_[keep_[k]];
    RETURN_IF_ERROR(EncodeRowOfUpdate(rows_.data() + keep_[k] * in_row, rows_type_, table_,
                                      rows_out + k * out_row, keep_[k]));
  }
  return absl::OkStatus();
}

}  // namespace emb::service
