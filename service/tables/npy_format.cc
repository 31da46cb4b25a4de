// The .npy format: https://numpy.org/doc/stable/reference/generated/numpy.lib.format.html
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "service/common/status_macros.h"
#include "service/tables/table_layout.h"

namespace emb::service {

absl::StatusOr<NpyArrayHeader> ParseNpyHeader(absl::string_view path, ReadAt read,
                                              size_t file_size) {
  constexpr size_t kPrefix = 10;  // magic (6), version (2), header length (2 in v1)
  if (file_size < kPrefix) {
    return Defect(path, absl::StrCat("cut .npy header: the file has ", file_size, " bytes"));
  }
  unsigned char prefix[12] = {};
  RETURN_IF_ERROR(read(0, absl::MakeSpan(reinterpret_cast<std::byte*>(prefix), kPrefix)));
  if (std::memcmp(prefix, "\x93NUMPY", 6) != 0) {
    return Defect(path, "bad magic: not a .npy file (expected \\x93NUMPY)");
  }
  const int major = prefix[6];
  size_t header_len;
  size_t header_start;
  if (major == 1) {
    header_len = prefix[8] | (size_t{prefix[9]} << 8);
    header_start = 10;
  } else if (major == 2 || major == 3) {
    if (file_size < 12) {
      return Defect(path, "cut .npy header");
    }
    RETURN_IF_ERROR(read(10, absl::MakeSpan(reinterpret_cast<std::byte*>(prefix + 10), 2)));
    header_len = prefix[8] | (size_t{prefix[9]} << 8) | (size_t{prefix[10]} << 16) |
                 (size_t{prefix[11]} << 24);
    header_start = 12;
  } else {
    return Defect(path, absl::StrCat("unsupported .npy format version ", major));
  }
  if (header_start + header_len > file_size) {
    return Defect(path, absl::StrCat("cut .npy header: it declares ", header_len,
                                     " bytes but the file ends at ", file_size));
  }
  std::string header(header_len, '\0');
  RETURN_IF_ERROR(
      read(header_start, absl::MakeSpan(reinterpret_cast<std::byte*>(header.data()), header_len)));

  // The header is a Python dict literal: {'descr': '<f4', 'fortran_order': False, 'shape': (R, C),
  // }
  auto field = [&](absl::string_view key) -> absl::string_view {
    const size_t k = header.find(absl::StrCat("'", key, "'"));
    if (k == std::string::npos) {
      return {};
    }
    const size_t colon = header.find(':', k);
    return colon == std::string::npos ? absl::string_view()
                                      : absl::string_view(header).substr(colon + 1);
  };
  absl::string_view descr = absl::StripLeadingAsciiWhitespace(field("descr"));
  absl::string_view order = absl::StripLeadingAsciiWhitespace(field("fortran_order"));
  absl::string_view shape_text = absl::StripLeadingAsciiWhitespace(field("shape"));
  if (descr.empty() || order.empty() || shape_text.empty() || shape_text[0] != '(') {
    return Defect(path, "cut or malformed .npy header (needs descr, fortran_order and shape)");
  }
  NpyArrayHeader out;
  // The quoted type string; what follows an unquoted one (a malformed header) is kept whole.
  const size_t quote = descr[0] == '\'' ? descr.find('\'', 1) : absl::string_view::npos;
  out.descr = quote == absl::string_view::npos ? std::string(descr)
                                               : std::string(descr.substr(1, quote - 1));
  out.fortran_order = !absl::StartsWith(order, "False");
  const size_t close = shape_text.find(')');
  if (close == absl::string_view::npos) {
    return Defect(path, "cut or malformed .npy header: unterminated shape");
  }
  for (absl::string_view part :
       absl::StrSplit(shape_text.substr(1, close - 1), ',', absl::SkipWhitespace())) {
    int64_t v;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(part), &v)) {
      return Defect(path,
                    absl::StrCat("shape dimension '", part, "' is not an integer or overflows"));
    }
    out.shape.push_back(v);
  }
  out.data_offset = header_start + header_len;
  return out;
}

absl::StatusOr<TableLayout> ParseNpy(absl::string_view path, ReadAt read, size_t file_size) {
  ASSIGN_OR_RETURN(const NpyArrayHeader header, ParseNpyHeader(path, read, file_size));
  TableLayout layout;
  if (header.descr == "<f4") {
    layout.dtype = DataType::kFloat32;
  } else if (header.descr == "<f2") {
    layout.dtype = DataType::kFloat16;
  } else {
    return Defect(path, absl::StrCat("unsupported dtype '", header.descr,
                                     "'; .npy tables must be little-endian float32 (<f4) or "
                                     "float16 (<f2)"));
  }
  if (header.fortran_order) {
    return Defect(path, "fortran_order is True; tables must be C order (row-major)");
  }
  RETURN_IF_ERROR(CheckShape(path, header.shape, &layout));
  layout.data_offset = header.data_offset;
  return layout;
}

}  // namespace emb::service
