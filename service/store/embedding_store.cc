#include "service/store/embedding_store.h"

#include "absl/container/flat_hash_map.h"
#include "kernels/quantize_rows.h"

namespace emb::service {

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

}  // namespace emb::service
