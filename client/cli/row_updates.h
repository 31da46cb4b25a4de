// What update and replay share: the .npy files of a message's ids and rows, and the table's
// sequence as ListTables on --target reports it.
#ifndef EMB_CLIENT_CLI_ROW_UPDATES_H_
#define EMB_CLIENT_CLI_ROW_UPDATES_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "client/embedding_client.h"
#include "kernels/data_type.h"

namespace emb::client::cli {

// The ids of --ids: a 1-D .npy of int64 (or int32, widened); `name` ("--ids=PATH") in errors.
absl::StatusOr<std::vector<int64_t>> ReadIdsNpy(const std::string& path, absl::string_view name);

// The rows of --rows for `num_ids` ids, in the type they are sent in (--rows_dtype, else the
// file's), and their dim; `name` ("--rows=PATH") in errors.
struct RowsToSend {
  std::string bytes;
  DataType dtype = DataType::kFloat32;
  int64_t dim = 0;
};

absl::StatusOr<RowsToSend> ReadRowsNpy(const std::string& path, absl::string_view name,
                                       size_t num_ids);

// `table` (empty: the default) as ListTables on --target reports it; `why` prefixes an error of
// the call.
absl::StatusOr<TableInfo> TableOnTarget(const std::string& table,
                                        const std::optional<TlsOptions>& tls,
                                        absl::string_view why);

// Where a stream's first sequence came from, when read from ListTables on --target (the admin
// service cannot report it): `table`'s sequence there.
struct SequenceSource {
  std::string table;
  int64_t sequence = 0;
};

// `status` of a stream whose sequences start one above `source`: a refused sequence
// (FAILED_PRECONDITION) says where the table's sequence was read, which may be another server
// than --admin_target's (--target's default, with only --admin_target given).
absl::Status WithSequenceSource(const absl::Status& status,
                                const std::optional<SequenceSource>& source,
                                const std::set<std::string>& flags_given);

}  // namespace emb::client::cli

#endif  // EMB_CLIENT_CLI_ROW_UPDATES_H_
