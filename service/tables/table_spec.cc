#include "service/tables/table_spec.h"

#include <algorithm>
#include <iterator>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "service/common/byte_size.h"

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

absl::StatusOr<ShardSpec> ParseShardSpec(absl::string_view text, absl::string_view what) {
  const auto invalid = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(what, "=", text, ": ", why));
  };
  const size_t slash = text.find('/');
  ShardSpec shard;
  if (slash == absl::string_view::npos || !absl::SimpleAtoi(text.substr(0, slash), &shard.index) ||
      !absl::SimpleAtoi(text.substr(slash + 1), &shard.count)) {
    return invalid("expected K/N, shard K (from 0) of N");
  }
  if (shard.count < 1 || shard.count > kMaxShards) {
    return invalid(absl::StrCat("the number of shards must be 1 to ", kMaxShards));
  }
  if (shard.index < 0 || shard.index >= shard.count) {
    return invalid(absl::StrCat("the shard must be 0 to ", shard.count - 1));
  }
  return shard;
}

absl::StatusOr<TableSpec> ParseTableSpec(absl::string_view flag) {
  const auto invalid = [&](absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat("--table=", flag, ": ", what));
  };
  const size_t eq = flag.find('=');
  if (eq == absl::string_view::npos || eq == 0 || eq + 1 == flag.size()) {
    return invalid(absl::StrCat("expected ", kTableSpecUsage));
  }
  TableSpec spec;
  spec.name = std::string(flag.substr(0, eq));
  if (absl::Status s = CheckTableName(spec.name); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--table: ", s.message()));
  }
  absl::string_view path = flag.substr(eq + 1);
  // The options: each starts at ",KEY=" of a known key and runs to the next one.
  constexpr absl::string_view kOptions[] = {"quantize", "gpu_budget", "hot_ids",
                                            "shard",    "placement",  "devices"};
  const auto next_option = [&](absl::string_view text, size_t from) {
    size_t first = absl::string_view::npos;
    for (absl::string_view key : kOptions) {
      const size_t at = text.find(absl::StrCat(",", key, "="), from);
      first = std::min(first, at);
    }
    return first;
  };
  absl::string_view options;
  if (const size_t at = next_option(path, 0); at != absl::string_view::npos) {
    options = path.substr(at);
    path = path.substr(0, at);
  }
  bool seen[std::size(kOptions)] = {};
  while (!options.empty()) {
    const size_t end = next_option(options, 1);
    const absl::string_view option =
        options.substr(1, end == absl::string_view::npos ? absl::string_view::npos : end - 1);
    options = end == absl::string_view::npos ? absl::string_view() : options.substr(end);
    const size_t key_end = option.find('=');
    const absl::string_view key = option.substr(0, key_end);
    const absl::string_view value = option.substr(key_end + 1);
    const size_t k = static_cast<size_t>(std::find(std::begin(kOptions), std::end(kOptions), key) -
                                         std::begin(kOptions));
    if (seen[k]) {
      return invalid(absl::StrCat(key, "= is given twice; each option at most once"));
    }
    seen[k] = true;
    if (value.empty()) {
      return invalid(absl::StrCat(key, "= has no value"));
    }
    if (key == "quantize") {
      if (value == "int8") {
        spec.quantize = DataType::kInt8Rowwise;
      } else if (value == "int4") {
        spec.quantize = DataType::kInt4Rowwise;
      } else {
        return invalid(
            absl::StrCat("quantize=", value, " is not int8 or int4 (row-wise quantization)"));
      }
    } else if (key == "gpu_budget") {
      absl::StatusOr<size_t> bytes = ParseByteSize(value);
      if (!bytes.ok()) {
        return invalid(absl::StrCat("gpu_budget ", bytes.status().message()));
      }
      if (*bytes == 0) {
        return invalid(absl::StrCat("gpu_budget=", value,
                                    ": the budget must be more than 0 bytes (leave the option "
                                    "out for a table with no budget of its own)"));
      }
      spec.gpu_budget_bytes = *bytes;
    } else if (key == "shard") {
      absl::StatusOr<ShardSpec> shard = ParseShardSpec(value, "shard");
      if (!shard.ok()) {
        return invalid(shard.status().message());
      }
      spec.shard = *shard;
    } else if (key == "placement") {
      if (value != "replicas" && value != "rows") {
        return invalid(absl::StrCat("placement=", value,
                                    " is not replicas or rows (how a table is laid out over the "
                                    "devices of --device)"));
      }
      spec.placement = std::string(value);
    } else if (key == "devices") {
      // As --device takes them, '+' in place of its commas (which separate these options).
      spec.devices = absl::StrReplaceAll(value, {{"+", ","}});
    } else {
      spec.hot_ids_path = std::string(value);
    }
  }
  if (const size_t hash = path.rfind('#'); hash != absl::string_view::npos) {
    spec.tensor = std::string(path.substr(hash + 1));
    path = path.substr(0, hash);
  }
  if (path.empty()) {
    return invalid(absl::StrCat("expected ", kTableSpecUsage, "; the path is missing"));
  }
  spec.path = std::string(path);
  return spec;
}

}  // namespace emb::service
