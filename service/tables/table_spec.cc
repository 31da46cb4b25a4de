#include "service/tables/table_spec.h"

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace emb::service {
namespace {

// The position of the first byte of `s` that is not part of a valid UTF-8 character (overlong
// forms, surrogates and code points past U+10FFFF included) or that is a control character; npos
// when there is none.
size_t FirstBadNameByte(absl::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto b = static_cast<unsigned char>(s[i]);
    if (b < 0x20 || b == 0x7f) {
      return i;
    }
    if (b < 0x80) {
      ++i;
      continue;
    }
    int len = 0;
    uint32_t cp = 0;
    if (b >= 0xc2 && b <= 0xdf) {
      len = 2;
      cp = b & 0x1f;
    } else if (b >= 0xe0 && b <= 0xef) {
      len = 3;
      cp = b & 0x0f;
    } else if (b >= 0xf0 && b <= 0xf4) {
      len = 4;
      cp = b & 0x07;
    } else {
      return i;
    }
    if (i + len > s.size()) {
      return i;
    }
    for (int k = 1; k < len; ++k) {
      const auto c = static_cast<unsigned char>(s[i + k]);
      if ((c & 0xc0) != 0x80) {
        return i;
      }
      cp = (cp << 6) | (c & 0x3f);
    }
    const bool overlong = (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000);
    if (overlong || (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff ||
        (cp >= 0x80 && cp < 0xa0)) {  // C1 controls
      return i;
    }
    i += len;
  }
  return absl::string_view::npos;
}

}  // namespace

absl::Status CheckTableName(absl::string_view name) {
  if (name.empty() || name.size() > kMaxTableNameBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("table name '", absl::CHexEscape(name.substr(0, kMaxTableNameBytes)), "' has ",
                     name.size(), " bytes; a name has 1 to ", kMaxTableNameBytes));
  }
  if (const size_t bad = FirstBadNameByte(name); bad != absl::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("table name '", absl::CHexEscape(name), "' is not printable UTF-8 (byte ", bad,
                     "): ListTables, the logs and the metrics' labels need printable UTF-8"));
  }
  return absl::OkStatus();
}

absl::StatusOr<TableSpec> ParseTableSpec(absl::string_view flag) {
  const size_t eq = flag.find('=');
  if (eq == absl::string_view::npos || eq == 0 || eq + 1 == flag.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--table=", flag, ": expected NAME=PATH[#TENSOR][,quantize=int8|int4]"));
  }
  TableSpec spec;
  spec.name = std::string(flag.substr(0, eq));
  if (absl::Status s = CheckTableName(spec.name); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--table: ", s.message()));
  }
  absl::string_view path = flag.substr(eq + 1);
  constexpr absl::string_view kQuantize = ",quantize=";
  if (const size_t q = path.rfind(kQuantize); q != absl::string_view::npos) {
    const absl::string_view how = path.substr(q + kQuantize.size());
    if (how == "int8") {
      spec.quantize = DataType::kInt8Rowwise;
    } else if (how == "int4") {
      spec.quantize = DataType::kInt4Rowwise;
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "--table=", flag, ": quantize=", how, " is not int8 or int4 (row-wise quantization)"));
    }
    path = path.substr(0, q);
  }
  if (const size_t hash = path.rfind('#'); hash != absl::string_view::npos) {
    spec.tensor = std::string(path.substr(hash + 1));
    path = path.substr(0, hash);
  }
  if (path.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--table=", flag,
                     ": expected NAME=PATH[#TENSOR][,quantize=int8|int4]; the path is missing"));
  }
  spec.path = std::string(path);
  return spec;
}

}  // namespace emb::service
