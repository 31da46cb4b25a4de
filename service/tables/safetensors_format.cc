// The .safetensors format: an 8-byte little-endian header length, a JSON header, the data.
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "service/common/status_macros.h"
#include "service/common/update_sequence.h"
#include "service/tables/json_reader.h"
#include "service/tables/table_layout.h"

namespace emb::service {

absl::StatusOr<TableLayout> ParseSafetensors(absl::string_view path, absl::string_view tensor,
                                             ReadAt read, size_t file_size) {
  if (file_size < 8) {
    return Defect(path, absl::StrCat("cut safetensors header: the file has ", file_size, " bytes"));
  }
  unsigned char len_bytes[8];
  RETURN_IF_ERROR(read(0, absl::MakeSpan(reinterpret_cast<std::byte*>(len_bytes), 8)));
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) {
    header_len = (header_len << 8) | len_bytes[i];
  }
  if (header_len > file_size - 8) {
    return Defect(path, absl::StrCat("cut safetensors header: it declares ", header_len,
                                     " bytes but the file has ", file_size - 8, " after it"));
  }
  if (header_len > (size_t{100} << 20)) {
    return Defect(path,
                  absl::StrCat("safetensors header of ", header_len, " bytes exceeds 100 MiB"));
  }
  std::string text(header_len, '\0');
  RETURN_IF_ERROR(read(8, absl::MakeSpan(reinterpret_cast<std::byte*>(text.data()), header_len)));
  const std::optional<Json> parsed = ParseJson(text);
  if (!parsed.has_value() || parsed->kind != Json::kObject || text.empty() || text[0] != '{') {
    return Defect(path, "bad magic: the safetensors header is not a JSON object");
  }
  const Json& header = *parsed;
  std::vector<std::string> names;
  for (const auto& [name, value] : header.fields) {
    if (name != "__metadata__") {
      names.push_back(name);
    }
  }
  std::string chosen(tensor);
  if (chosen.empty()) {
    if (names.size() != 1) {
      return Defect(path, absl::StrCat("holds ", names.size(), " tensors (",
                                       absl::StrJoin(names, ", "), "); pick one with PATH#TENSOR"));
    }
    chosen = names[0];
  }
  auto it = header.fields.find(chosen);
  if (it == header.fields.end() || chosen == "__metadata__") {
    return Defect(path, absl::StrCat("no tensor named '", chosen, "' (it holds ",
                                     absl::StrJoin(names, ", "), ")"));
  }
  const Json& t = it->second;
  auto dtype = t.fields.find("dtype");
  auto shape = t.fields.find("shape");
  auto offsets = t.fields.find("data_offsets");
  if (t.kind != Json::kObject || dtype == t.fields.end() || shape == t.fields.end() ||
      offsets == t.fields.end() || shape->second.kind != Json::kArray ||
      offsets->second.kind != Json::kArray || offsets->second.items.size() != 2) {
    return Defect(path, absl::StrCat("tensor '", chosen,
                                     "' lacks dtype, shape or data_offsets [begin, end]"));
  }
  TableLayout layout;
  // The metadata: the last applied sequence, and a quantized table's layout and dim.
  std::string quantized_layout;
  int64_t quantized_dim = 0;
  if (auto meta = header.fields.find("__metadata__"); meta != header.fields.end()) {
    const auto& fields = meta->second.fields;
    auto seq = fields.find(kSequenceMetadataKey);
    if (seq != fields.end() && (seq->second.kind != Json::kString ||
                                !absl::SimpleAtoi(seq->second.str, &layout.sequence) ||
                                layout.sequence < 0 || layout.sequence >= kSequenceLimit)) {
      return Defect(path, absl::StrCat("__metadata__.", kSequenceMetadataKey,
                                       " is not a non-negative integer in a string below ",
                                       kSequenceLimit, " (2^62, the limit of a sequence)"));
    }
    if (auto l = fields.find(kLayoutMetadataKey); l != fields.end()) {
      quantized_layout = l->second.str;
    }
    if (auto d = fields.find(kDimMetadataKey);
        d != fields.end() &&
        (d->second.kind != Json::kString || !absl::SimpleAtoi(d->second.str, &quantized_dim) ||
         quantized_dim < 1)) {
      return Defect(path, absl::StrCat("__metadata__.", kDimMetadataKey,
                                       " is not a positive integer in a string"));
    }
  }
  const std::string& dt = dtype->second.str;
  if (dt == "F32") {
    layout.dtype = DataType::kFloat32;
  } else if (dt == "F16") {
    layout.dtype = DataType::kFloat16;
  } else if (dt == "BF16") {
    layout.dtype = DataType::kBFloat16;
  } else if (dt == "U8" && (quantized_layout == DataTypeName(DataType::kInt8Rowwise) ||
                            quantized_layout == DataTypeName(DataType::kInt4Rowwise))) {
    layout.dtype = quantized_layout == DataTypeName(DataType::kInt8Rowwise)
                       ? DataType::kInt8Rowwise
                       : DataType::kInt4Rowwise;
  } else {
    return Defect(path, absl::StrCat("tensor '", chosen, "' has unsupported dtype ", dt,
                                     "; tables must be F32, F16 or BF16, or U8 with __metadata__.",
                                     kLayoutMetadataKey, " int8_rowwise or int4_rowwise"));
  }
  std::vector<int64_t> dims;
  for (const Json& d : shape->second.items) {
    int64_t v;
    if (!JsonInt(d, &v)) {
      return Defect(path, absl::StrCat("tensor '", chosen, "' has a non-integer shape entry"));
    }
    dims.push_back(v);
  }
  RETURN_IF_ERROR(CheckShape(path, dims, &layout));
  if (IsQuantized(layout.dtype)) {
    // The shape's second axis is the row's bytes; the elements are fewer.
    const int64_t row_bytes = layout.dim;
    const int64_t trailer = layout.dtype == DataType::kInt8Rowwise ? 8 : 4;
    const int64_t dim = quantized_dim > 0                        ? quantized_dim
                        : layout.dtype == DataType::kInt8Rowwise ? row_bytes - trailer
                                                                 : 2 * (row_bytes - trailer);
    if (dim < 1 || static_cast<int64_t>(RowBytes(layout.dtype, dim)) != row_bytes) {
      return Defect(path,
                    absl::StrCat("tensor '", chosen, "' rows of ", row_bytes, " bytes are not ",
                                 quantized_layout, " rows of ", dim, " elements"));
    }
    layout.dim = dim;
  }
  int64_t begin;
  int64_t end;
  if (!JsonInt(offsets->second.items[0], &begin) || !JsonInt(offsets->second.items[1], &end) ||
      begin < 0 || end < begin) {
    return Defect(path, absl::StrCat("tensor '", chosen, "' has invalid data_offsets"));
  }
  size_t need;
  if (!TableBytes(layout.rows, layout.dim, layout.dtype, &need)) {
    return Defect(path, absl::StrCat("shape [", layout.rows, ", ", layout.dim, "] of ",
                                     DataTypeName(layout.dtype), " overflows 64-bit sizes"));
  }
  if (static_cast<size_t>(end - begin) != need) {
    return Defect(path, absl::StrCat("tensor '", chosen, "' data_offsets span ", end - begin,
                                     " bytes but shape [", layout.rows, ", ", layout.dim, "] of ",
                                     DataTypeName(layout.dtype), " needs ", need));
  }
  layout.data_offset = 8 + header_len + static_cast<size_t>(begin);
  return layout;
}

}  // namespace emb::service
