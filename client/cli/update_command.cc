// embedding-client update: overwrites rows through the admin listener.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iostream>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "client/admin_client.h"
#include "client/cli/commands.h"
#include "client/cli/common.h"
#include "client/cli/flags.h"
#include "client/cli/row_updates.h"
#include "client/embedding_client.h"
#include "kernels/data_type.h"

namespace emb::client::cli {
namespace {

// The sequence the first message gets: --sequence, or one more than the table's last applied
// one as ListTables on --target reports it (then set in `source`).
absl::StatusOr<int64_t> FirstSequence(const std::string& table,
                                      const std::optional<TlsOptions>& tls,
                                      std::optional<SequenceSource>* source) {
  if (const int64_t sequence = absl::GetFlag(FLAGS_sequence); sequence != 0) {
    return sequence;
  }
  absl::StatusOr<TableInfo> info =
      TableOnTarget(table, tls,
                    absl::StrCat("reading the table's sequence from --target=", LookUpTarget(),
                                 " (give --sequence to skip it): "));
  if (!info.ok()) {
    return info.status();
  }
  *source = SequenceSource{info->name, info->sequence};
  return info->sequence + 1;
}

}  // namespace

int UpdateCommand(const std::vector<std::string>& args, const std::optional<TlsOptions>& tls,
                  const std::set<std::string>& flags_given) {
  if (!args.empty()) {
    return Fail("update", absl::InvalidArgumentError("takes no arguments, only flags"));
  }
  const std::string ids_path = absl::GetFlag(FLAGS_ids);
  const std::string rows_path = absl::GetFlag(FLAGS_rows);
  if (ids_path.empty() || rows_path.empty()) {
    return Fail("update", absl::InvalidArgumentError("needs --ids and --rows (.npy files)"));
  }
  const int64_t per_message = absl::GetFlag(FLAGS_rows_per_message);
  if (per_message < 0) {
    return Fail("update", absl::InvalidArgumentError("--rows_per_message must be >= 0"));
  }
  absl::StatusOr<std::vector<int64_t>> ids = ReadIdsNpy(ids_path, absl::StrCat("--ids=", ids_path));
  if (!ids.ok()) {
    return Fail("update", ids.status());
  }
  absl::StatusOr<RowsToSend> rows =
      ReadRowsNpy(rows_path, absl::StrCat("--rows=", rows_path), ids->size());
  if (!rows.ok()) {
    return Fail("update", rows.status());
  }
  absl::StatusOr<std::optional<TlsOptions>> admin_tls = TlsFromFlags(AdminTlsFlags());
  if (!admin_tls.ok()) {
    return Fail("update", admin_tls.status());
  }
  const std::string table = absl::GetFlag(FLAGS_table);
  std::optional<SequenceSource> source;
  absl::StatusOr<int64_t> sequence = FirstSequence(table, tls, &source);
  if (!sequence.ok()) {
    return Fail("update", sequence.status());
  }
  std::unique_ptr<AdminClient> admin = AdminClient::Connect(AdminTarget(), *admin_tls);
  absl::StatusOr<std::unique_ptr<RowWriter>> writer =
      admin->OpenWriter(absl::GetFlag(FLAGS_timeout).value);
  if (!writer.ok()) {
    return Fail("update", writer.status());
  }
  // Every message is sent before the acks are read: the writer keeps a bounded number in
  // flight, and the acks of the messages applied before a refused one are printed all the same.
  const size_t n = ids->size();
  const size_t step = per_message > 0 ? static_cast<size_t>(per_message) : std::max<size_t>(n, 1);
  const size_t row_bytes = static_cast<size_t>(rows->dim) * ElementSize(rows->dtype);
  for (size_t begin = 0, k = 0; begin < std::max<size_t>(n, 1); begin += step, ++k) {
    const size_t end = std::min(n, begin + step);
    RowUpdate update;
    update.table = table;
    update.ids.assign(ids->data() + begin, ids->data() + end);
    update.rows = rows->bytes.substr(begin * row_bytes, (end - begin) * row_bytes);
    update.dtype = rows->dtype;
    update.sequence = *sequence + static_cast<int64_t>(k);
    if (!(*writer)->Send(update).ok()) {
      break;  // the stream has ended; Finish says why
    }
  }
  const absl::Status status = (*writer)->Finish();
  std::string out;
  while ((*writer)->unacknowledged() > 0) {
    absl::StatusOr<UpdateAck> ack = (*writer)->NextAck();
    if (!ack.ok()) {
      break;
    }
    absl::StrAppend(&out, "table ", ack->table, " sequence ", ack->sequence, " rows ", ack->rows,
                    "\n");
  }
  std::cout << out;
  std::cout.flush();
  if (!status.ok()) {
    return FailAdmin("update", WithSequenceSource(status, source, flags_given));
  }
  return 0;
}

}  // namespace emb::client::cli
