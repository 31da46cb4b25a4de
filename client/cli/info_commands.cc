// embedding-client tables, versions and health: what the server reports on --target.
#include <algorithm>
#include <cstddef>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "client/cli/commands.h"
#include "client/cli/common.h"
#include "client/cli/flags.h"
#include "client/embedding_client.h"
#include "kernels/data_type.h"

namespace emb::client::cli {

int TablesCommand(const std::vector<std::string>& args, const std::optional<TlsOptions>& tls) {
  if (!args.empty()) {
    return Fail("tables", absl::InvalidArgumentError("takes no arguments"));
  }
  absl::StatusOr<std::vector<TableInfo>> tables =
      EmbeddingClient::Connect(LookUpTarget(), tls)->ListTables(absl::GetFlag(FLAGS_timeout).value);
  if (!tables.ok()) {
    return Fail("tables", tables.status());
  }
  std::vector<std::vector<std::string>> cells = {{"NAME", "ROWS", "DIM", "DTYPE", "BYTES", "DEVICE",
                                                  "WHERE", "DEFAULT", "VERSION", "PINNED",
                                                  "SEQUENCE", "UPDATED_ROWS"}};
  for (const TableInfo& t : *tables) {
    // Where the rows are: on the device (host memory for the CPU), or in the host tier; and for
    // a shard, which of the whole table's rows it holds.
    std::string where = t.host_tier ? absl::StrCat("host+cache ", t.cache_rows, " rows") : "device";
    if (t.shard_count > 0) {
      absl::StrAppend(&where, " (shard ", t.shard_index, "/", t.shard_count, ": rows ", t.first_row,
                      "..", t.first_row + t.rows - 1, " of ", t.whole_rows, ")");
    }
    if (!t.parts.empty()) {  // several devices: "rows over cuda:0 0..499, cuda:1 500..999"
      absl::StrAppend(&where, " ", t.placement, " over");
      for (size_t k = 0; k < t.parts.size(); ++k) {
        absl::StrAppend(&where, k == 0 ? " " : ", ", t.parts[k].device, " ", t.parts[k].first_row,
                        "..", t.parts[k].first_row + t.parts[k].rows - 1);
      }
    }
    cells.push_back({t.name, absl::StrCat(t.rows), absl::StrCat(t.dim), DataTypeName(t.dtype),
                     absl::StrCat(t.bytes), t.device, where, t.is_default ? "yes" : "no",
                     absl::StrCat(t.version), t.version_pinned ? "yes" : "no",
                     absl::StrCat(t.sequence), absl::StrCat(t.updated_rows)});
  }
  std::vector<size_t> width(cells.front().size(), 0);
  for (const auto& row : cells) {
    for (size_t i = 0; i < row.size(); ++i) {
      width[i] = std::max(width[i], row[i].size());
    }
  }
  std::string out;
  for (const auto& row : cells) {
    for (size_t i = 0; i < row.size(); ++i) {
      absl::StrAppend(&out, row[i],
                      i + 1 < row.size() ? std::string(width[i] - row[i].size() + 2, ' ') : "\n");
    }
  }
  std::cout << out;
  return 0;
}

// One line a table: "table NAME version V sequence S pinned true|false", in ListTables' order
// (the default first).
int VersionsCommand(const std::vector<std::string>& args, const std::optional<TlsOptions>& tls) {
  if (!args.empty()) {
    return Fail("versions", absl::InvalidArgumentError("takes no arguments"));
  }
  absl::StatusOr<std::vector<TableInfo>> tables =
      EmbeddingClient::Connect(LookUpTarget(), tls)->ListTables(absl::GetFlag(FLAGS_timeout).value);
  if (!tables.ok()) {
    return Fail("versions", tables.status());
  }
  std::string out;
  for (const TableInfo& t : *tables) {
    absl::StrAppend(&out, "table ", t.name, " version ", t.version, " sequence ", t.sequence,
                    " pinned ", t.version_pinned ? "true" : "false", "\n");
  }
  std::cout << out;
  return 0;
}

int HealthCommand(const std::vector<std::string>& args, const std::optional<TlsOptions>& tls) {
  if (args.size() > 1) {
    return Fail("health", absl::InvalidArgumentError("takes at most one service name"));
  }
  absl::StatusOr<std::string> status =
      EmbeddingClient::Connect(LookUpTarget(), tls)
          ->CheckHealth(args.empty() ? "" : args[0], absl::GetFlag(FLAGS_timeout).value);
  if (!status.ok()) {
    return Fail("health", status.status());
  }
  std::cout << *status << "\n";
  return *status == "SERVING" ? 0 : 2;
}

}  // namespace emb::client::cli
