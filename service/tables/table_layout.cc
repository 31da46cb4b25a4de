#include "service/tables/table_layout.h"

#include <cstring>
#include <limits>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "service/common/status_macros.h"

namespace emb::service {

bool TableBytes(int64_t rows, int64_t dim, DataType t, size_t* out) {
  size_t row;
  if (IsQuantized(t)) {
    row = RowBytes(t, dim);  // dim plus a few bytes: dim is at most int64's largest
  } else if (__builtin_mul_overflow(static_cast<size_t>(dim), ElementSize(t), &row)) {
    return false;
  }
  return !__builtin_mul_overflow(static_cast<size_t>(rows), row, out) &&
         *out <= static_cast<size_t>(std::numeric_limits<int64_t>::max());
}

absl::Status Defect(absl::string_view path, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": ", what));
}

absl::Status CheckShape(absl::string_view path, const std::vector<int64_t>& shape,
                        TableLayout* layout) {
  if (shape.size() != 2) {
    return Defect(path, absl::StrCat("rank ", shape.size(), " (shape [", absl::StrJoin(shape, ", "),
                                     "]); an embedding table must be 2-D [rows, dim]"));
  }
  if (shape[0] <= 0 || shape[1] <= 0) {
    return Defect(path, absl::StrCat("shape [", shape[0], ", ", shape[1],
                                     "] has a zero or negative dimension"));
  }
  layout->rows = shape[0];
  layout->dim = shape[1];
  return absl::OkStatus();
}

absl::StatusOr<TableLayout> ParseLayout(const TableSpec& spec, size_t file_size, ReadAt read) {
  const std::string& path = spec.path;
  if (file_size == 0) {
    return Defect(path, "empty file");
  }
  TableLayout layout;
  if (absl::EndsWith(path, ".npy")) {
    if (!spec.tensor.empty()) {
      return Defect(path, "#TENSOR applies only to .safetensors files");
    }
    ASSIGN_OR_RETURN(layout, ParseNpy(path, read, file_size));
  } else if (absl::EndsWith(path, ".safetensors")) {
    ASSIGN_OR_RETURN(layout, ParseSafetensors(path, spec.tensor, read, file_size));
  } else {
    return Defect(path, "unknown format: the name must end in .npy or .safetensors");
  }
  size_t bytes;
  if (!TableBytes(layout.rows, layout.dim, layout.dtype, &bytes)) {
    return Defect(path, absl::StrCat("shape [", layout.rows, ", ", layout.dim, "] of ",
                                     DataTypeName(layout.dtype), " overflows 64-bit sizes"));
  }
  if (layout.data_offset > file_size || bytes > file_size - layout.data_offset) {
    return Defect(path,
                  absl::StrCat("truncated data: shape [", layout.rows, ", ", layout.dim, "] of ",
                               DataTypeName(layout.dtype), " needs ", bytes, " bytes from offset ",
                               layout.data_offset, " but the file has ", file_size));
  }
  return layout;
}

absl::StatusOr<TableLayout> ParseTableFile(const TableSpec& spec, absl::string_view file) {
  return ParseLayout(spec, file.size(), [&](size_t offset, absl::Span<std::byte> dst) {
    if (offset > file.size() || dst.size() > file.size() - offset) {
      return absl::InternalError(absl::StrCat(spec.path, ": read failed at byte ", file.size(),
                                              ": unexpected end of file"));
    }
    if (!dst.empty()) {
      std::memcpy(dst.data(), file.data() + offset, dst.size());
    }
    return absl::OkStatus();
  });
}

}  // namespace emb::service
