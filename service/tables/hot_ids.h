// The hot_ids= option of --table: a table's rows to put into a host tier's GPU cache at start-up,
// hottest first, from a .npy file. Stateless.
#ifndef EMB_SERVICE_TABLES_HOT_IDS_H_
#define EMB_SERVICE_TABLES_HOT_IDS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace emb::service {

// The ids of the .npy file `path`: a 1-D array of little-endian int64 or int32 (widened), each in
// [0, rows), in the file's order (duplicates are kept: the cache skips them). NOT_FOUND when the
// file does not exist; INVALID_ARGUMENT "PATH: WHAT" for anything else: not a regular file, not a
// 1-D int64/int32 .npy, data of another size than the shape says, or an id out of range (naming
// its position and value), or a file over 8 bytes a row of the table (plus 1 MiB for the header),
// which is refused unread.
absl::StatusOr<std::vector<int64_t>> ReadHotIds(const std::string& path, int64_t rows);

// The same checks on a file's bytes held in memory (`path` names it in messages only).
absl::StatusOr<std::vector<int64_t>> ParseHotIds(absl::string_view path, absl::string_view file,
                                                 int64_t rows);

}  // namespace emb::service

#endif  // EMB_SERVICE_TABLES_HOT_IDS_H_
