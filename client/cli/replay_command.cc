// embedding-client replay: brings a table up to date from its delta log, through the admin
// listener.
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "client/admin_client.h"
#include "client/cli/commands.h"
#include "client/cli/common.h"
#include "client/cli/flags.h"
#include "client/cli/row_updates.h"
#include "client/embedding_client.h"

namespace emb::client::cli {
namespace {

// The messages of a delta log (replay --log): a directory of one table's messages, one per
// sequence number SEQ (decimal, > 0; leading zeros allowed), as SEQ.ids.npy and SEQ.rows.npy
// (what update's --ids and --rows take). A message is in the log once its ids file is: a
// publisher writes SEQ.rows.npy first, each file under another name (not ending in .ids.npy)
// then renamed. Other names are ignored. Maps each SEQ to "DIR/SEQ", the files' common prefix.
absl::StatusOr<std::map<int64_t, std::string>> ListDeltaLog(const std::string& dir) {
  std::error_code error;
  std::filesystem::directory_iterator it(dir, error);
  if (error) {
    return absl::NotFoundError(
        absl::StrCat("--log=", dir, ": cannot list the directory: ", error.message()));
  }
  std::map<int64_t, std::string> messages;
  for (; it != std::filesystem::directory_iterator(); it.increment(error)) {
    const std::string name = it->path().filename().string();
    absl::string_view seq_text = name;
    int64_t seq;
    if (!absl::ConsumeSuffix(&seq_text, ".ids.npy") || seq_text.empty() ||
        !std::all_of(seq_text.begin(), seq_text.end(),
                     [](char c) { return c >= '0' && c <= '9'; }) ||
        !absl::SimpleAtoi(seq_text, &seq) || seq <= 0) {
      continue;
    }
    const std::string prefix = (std::filesystem::path(dir) / std::string(seq_text)).string();
    if (auto [at, added] = messages.emplace(seq, prefix); !added) {
      return absl::InvalidArgumentError(absl::StrCat("--log=", dir, ": two files of message ", seq,
                                                     ": ", at->second, ".ids.npy and ", prefix,
                                                     ".ids.npy"));
    }
  }
  if (error) {
    return absl::InternalError(absl::StrCat("--log=", dir, ": listing it: ", error.message()));
  }
  return messages;
}

// The message of the delta log whose files start with `prefix`, as sequence `seq` of `table`.
absl::StatusOr<RowUpdate> ReadLogMessage(const std::string& prefix, const std::string& table,
                                         int64_t seq) {
  const std::string ids_path = prefix + ".ids.npy";
  const std::string rows_path = prefix + ".rows.npy";
  absl::StatusOr<std::vector<int64_t>> ids = ReadIdsNpy(ids_path, ids_path);
  if (!ids.ok()) {
    return ids.status();
  }
  absl::StatusOr<RowsToSend> rows = ReadRowsNpy(rows_path, rows_path, ids->size());
  if (!rows.ok()) {
    return rows.status();
  }
  RowUpdate update;
  update.table = table;
  update.ids = *std::move(ids);
  update.rows = std::move(rows->bytes);
  update.dtype = rows->dtype;
  update.sequence = seq;
  return update;
}

}  // namespace

// replay: brings --table up to date from the delta log --log. Reads the table's sequence S from
// ListTables on --target, then sends the log's messages S+1, S+2, ... on one UpdateRows stream to
// --admin_target (many in flight), each with its SEQ as its sequence; prints one line per ack and
// "replayed N messages, sequences A..B; table T now at sequence B". A missing SEQ after S (the
// log lost a message) stops it before that one: the messages before it are sent, and it exits 1
// naming it. A log with nothing above S sends nothing and says so.
int ReplayCommand(const std::vector<std::string>& args, const std::optional<TlsOptions>& tls,
                  const std::set<std::string>& flags_given) {
  if (!args.empty()) {
    return Fail("replay", absl::InvalidArgumentError("takes no arguments, only flags"));
  }
  const std::string dir = absl::GetFlag(FLAGS_log);
  if (dir.empty()) {
    return Fail("replay", absl::InvalidArgumentError("needs --log=DIR, the delta log"));
  }
  absl::StatusOr<std::optional<TlsOptions>> admin_tls = TlsFromFlags(AdminTlsFlags());
  if (!admin_tls.ok()) {
    return Fail("replay", admin_tls.status());
  }
  absl::StatusOr<std::map<int64_t, std::string>> log = ListDeltaLog(dir);
  if (!log.ok()) {
    return Fail("replay", log.status());
  }
  const std::string table = absl::GetFlag(FLAGS_table);
  absl::StatusOr<TableInfo> info = TableOnTarget(
      table, tls,
      absl::StrCat("reading the table's sequence from --target=", LookUpTarget(), ": "));
  if (!info.ok()) {
    return Fail("replay", info.status());
  }
  const int64_t from = info->sequence;
  auto next = log->upper_bound(from);
  if (next == log->end()) {
    std::cout << absl::StrCat(
        "table ", info->name, " at sequence ", from, "; the log's newest message is ",
        log->empty() ? "none" : absl::StrCat(log->rbegin()->first), ": nothing to replay\n");
    return 0;
  }
  std::unique_ptr<AdminClient> admin = AdminClient::Connect(AdminTarget(), *admin_tls);
  absl::StatusOr<std::unique_ptr<RowWriter>> writer =
      admin->OpenWriter(absl::GetFlag(FLAGS_timeout).value);
  if (!writer.ok()) {
    return Fail("replay", writer.status());
  }
  // Each message is read just before it is sent; the writer keeps many in flight.
  absl::Status stopped;
  for (int64_t seq = from + 1; next != log->end(); ++next, ++seq) {
    if (next->first != seq) {
      stopped = absl::FailedPreconditionError(
          absl::StrCat("the log has no message ", seq, " (after ", seq - 1, " its next is ",
                       next->first, "): it lost a message; stopped before it"));
      break;
    }
    absl::StatusOr<RowUpdate> update = ReadLogMessage(next->second, table, seq);
    if (!update.ok()) {
      stopped = update.status();
      break;
    }
    if (!(*writer)->Send(*update).ok()) {
      break;  // the stream has ended; Finish says why
    }
  }
  const absl::Status status = (*writer)->Finish();
  std::string out;
  int64_t replayed = 0;
  int64_t first = 0;
  int64_t last = 0;
  while ((*writer)->unacknowledged() > 0) {
    absl::StatusOr<UpdateAck> ack = (*writer)->NextAck();
    if (!ack.ok()) {
      break;
    }
    absl::StrAppend(&out, "table ", ack->table, " sequence ", ack->sequence, " rows ", ack->rows,
                    "\n");
    first = replayed++ == 0 ? ack->sequence : first;
    last = ack->sequence;
  }
  if (replayed > 0) {
    absl::StrAppend(&out, "replayed ", replayed, " messages, sequences ", first, "..", last,
                    "; table ", info->name, " now at sequence ", last, "\n");
  }
  std::cout << out;
  std::cout.flush();
  if (!status.ok()) {
    return FailAdmin("replay",
                     WithSequenceSource(status, SequenceSource{info->name, from}, flags_given));
  }
  if (!stopped.ok()) {
    return Fail("replay", stopped);
  }
  return 0;
}

}  // namespace emb::client::cli
