#include "client/npy_file.h"

#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace emb::client {
namespace {

absl::Status Bad(absl::string_view name, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(name, ": ", what));
}

// The value after `'key':` in the header's dict literal, with leading spaces stripped; empty if
// the key is missing.
absl::string_view Field(absl::string_view header, absl::string_view key) {
  const size_t k = header.find(absl::StrCat("'", key, "'"));
  if (k == absl::string_view::npos) {
    return {};
  }
  const size_t colon = header.find(':', k);
  return colon == absl::string_view::npos
             ? absl::string_view()
             : absl::StripLeadingAsciiWhitespace(header.substr(colon + 1));
}

}  // namespace

absl::StatusOr<NpyArray> ParseNpy(absl::string_view bytes, absl::string_view name) {
  if (bytes.size() < 10 || bytes.substr(0, 6) != absl::string_view("\x93NUMPY", 6)) {
    return Bad(name, "not a .npy file (no \\x93NUMPY magic)");
  }
  const auto byte = [&](size_t i) { return static_cast<size_t>(static_cast<uint8_t>(bytes[i])); };
  const size_t major = byte(6);
  size_t header_len;
  size_t header_start;
  if (major == 1) {
    header_len = byte(8) | (byte(9) << 8);
    header_start = 10;
  } else if ((major == 2 || major == 3) && bytes.size() >= 12) {
    header_len = byte(8) | (byte(9) << 8) | (byte(10) << 16) | (byte(11) << 24);
    header_start = 12;
  } else {
    return Bad(name, absl::StrCat("unsupported or cut .npy format version ", major));
  }
  if (header_start + header_len > bytes.size()) {
    return Bad(name, "cut .npy header");
  }
  const absl::string_view header = bytes.substr(header_start, header_len);
  const absl::string_view descr = Field(header, "descr");
  const absl::string_view order = Field(header, "fortran_order");
  const absl::string_view shape_text = Field(header, "shape");
  if (descr.size() < 2 || descr[0] != '\'' || order.empty() || shape_text.empty() ||
      shape_text[0] != '(') {
    return Bad(name, "malformed .npy header (needs descr, fortran_order and shape)");
  }
  NpyArray array;
  const size_t quote = descr.find('\'', 1);
  const size_t close = shape_text.find(')');
  if (quote == absl::string_view::npos || close == absl::string_view::npos) {
    return Bad(name, "malformed .npy header");
  }
  array.descr = std::string(descr.substr(1, quote - 1));
  for (absl::string_view part :
       absl::StrSplit(shape_text.substr(1, close - 1), ',', absl::SkipWhitespace())) {
    int64_t v;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(part), &v) || v < 0) {
      return Bad(name, absl::StrCat("bad shape dimension '", part, "'"));
    }
    array.shape.push_back(v);
  }
  int size;
  if (array.descr.size() < 3 || !absl::SimpleAtoi(array.descr.substr(2), &size) || size < 1) {
    return Bad(name, absl::StrCat("unsupported element type '", array.descr, "'"));
  }
  array.element_size = static_cast<size_t>(size);
  if (array.descr[0] == '>' && size > 1) {
    return Bad(name, absl::StrCat("big-endian elements ('", array.descr, "') are not supported"));
  }
  if (absl::StartsWith(order, "True") && array.shape.size() > 1) {
    return Bad(name, "fortran_order is True; the array must be C order (row-major)");
  }
  uint64_t count = 1;
  for (int64_t d : array.shape) {
    if (d > 0 && count > std::numeric_limits<uint64_t>::max() / array.element_size / d) {
      return Bad(name, "the shape overflows");
    }
    count *= static_cast<uint64_t>(d);
  }
  const size_t data_start = header_start + header_len;
  if (bytes.size() - data_start != count * array.element_size) {
    return Bad(name, absl::StrCat("holds ", bytes.size() - data_start,
                                  " bytes of data; its shape (", absl::StrJoin(array.shape, ", "),
                                  ") of '", array.descr, "' needs ", count * array.element_size));
  }
  array.data = std::string(bytes.substr(data_start));
  return array;
}

absl::StatusOr<NpyArray> ReadNpy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream contents;
  if (in) {
    contents << in.rdbuf();
  }
  if (!in) {
    return absl::NotFoundError(absl::StrCat("cannot read ", path));
  }
  return ParseNpy(contents.str(), path);
}

}  // namespace emb::client
