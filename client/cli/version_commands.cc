// embedding-client save, pin and unpin: a table's versions, through the admin listener.
#include <cstdint>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "client/admin_client.h"
#include "client/cli/commands.h"
#include "client/cli/common.h"
#include "client/cli/flags.h"
#include "client/embedding_client.h"

namespace emb::client::cli {

int SaveCommand(const std::vector<std::string>& args) {
  if (!args.empty()) {
    return Fail("save",
                absl::InvalidArgumentError("takes no arguments; name the table with --table"));
  }
  absl::StatusOr<std::optional<TlsOptions>> admin_tls = TlsFromFlags(AdminTlsFlags());
  if (!admin_tls.ok()) {
    return Fail("save", admin_tls.status());
  }
  absl::StatusOr<SavedVersion> saved =
      AdminClient::Connect(AdminTarget(), *admin_tls)
          ->SaveTable(absl::GetFlag(FLAGS_table), absl::GetFlag(FLAGS_timeout).value);
  if (!saved.ok()) {
    return FailAdmin("save", saved.status());
  }
  std::cout << absl::StrCat("table ", saved->table, " version ", saved->version, " sequence ",
                            saved->sequence, " path ", saved->path, " bytes ", saved->bytes, "\n");
  return 0;
}

// pin VERSION (unpin: `pin 0`): LoadVersion of --table through the admin listener; prints
// "table T version V sequence S pinned true|false".
int PinCommand(const std::string& command, const std::vector<std::string>& args) {
  int64_t version = 0;
  if (command == "unpin") {
    if (!args.empty()) {
      return Fail(command,
                  absl::InvalidArgumentError("takes no arguments; name the table with --table"));
    }
  } else if (args.size() != 1 || !absl::SimpleAtoi(args[0], &version) || version < 0) {
    return Fail(command, absl::InvalidArgumentError(
                             "takes one version number: 0 (the newest, unpinned) or a version "
                             "to serve and pin; name the table with --table"));
  }
  absl::StatusOr<std::optional<TlsOptions>> admin_tls = TlsFromFlags(AdminTlsFlags());
  if (!admin_tls.ok()) {
    return Fail(command, admin_tls.status());
  }
  absl::StatusOr<LoadedVersion> loaded =
      AdminClient::Connect(AdminTarget(), *admin_tls)
          ->LoadVersion(absl::GetFlag(FLAGS_table), version, absl::GetFlag(FLAGS_timeout).value);
  if (!loaded.ok()) {
    return FailAdmin(command, loaded.status());
  }
  std::cout << absl::StrCat("table ", loaded->table, " version ", loaded->version, " sequence ",
                            loaded->sequence, " pinned ", loaded->pinned ? "true" : "false", "\n");
  return 0;
}

}  // namespace emb::client::cli
