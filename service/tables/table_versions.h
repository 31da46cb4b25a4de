// Version directories: a table given as --table=NAME=DIR is DIR/1/, DIR/2/, ... each holding one
// .npy or .safetensors file (with DIR#TENSOR, the tensor of that name in each). A version's name is
// its number in decimal without leading zeros, 1 to 2^63-1 (ParseVersion); any other name (0001,
// +1, 1.tmp) is no version, neither listed nor opened. The newest version whose file passes the
// loader's checks is served; SaveTable writes the next one. A version is written under a
// temporary name (DIR/.tmp-N-PID-TOKEN/, TOKEN 64 random bits, locked with flock(2) while it is
// written), synced, then renamed, so a name that is a number is a complete version unless the disk
// lies; anything else in DIR is ignored. A server that stops mid-write leaves its temporary
// directory behind, which RemoveStaleTemporaries removes at the next start.
// Thread-compatible (no state; the file system is the state).
#ifndef EMB_SERVICE_TABLES_TABLE_VERSIONS_H_
#define EMB_SERVICE_TABLES_TABLE_VERSIONS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "kernels/data_type.h"
#include "service/tables/table_source.h"
#include "service/tables/table_spec.h"

namespace emb::service {

// True when `path` names a directory (a version directory, for --table).
bool IsDirectory(const std::string& path);

// The version `name` names: a decimal number in [1, 2^63-1] with no sign and no leading zero;
// nullopt for any other name.
std::optional<int64_t> ParseVersion(absl::string_view name);

// The version numbers in `dir`, newest first: the subdirectories (or links to directories) whose
// names are versions (ParseVersion). NOT_FOUND when `dir` cannot be read.
absl::StatusOr<std::vector<int64_t>> ListVersions(const std::string& dir);

// The number the next version of `dir` gets: one past every entry whose name is a version,
// whatever it is (a directory, a stray file, a dangling link), so that no entry blocks the rename
// into place. NOT_FOUND when `dir` cannot be read; FAILED_PRECONDITION, naming the limit, when an
// entry is named 9223372036854775807 (2^63-1): no version can follow it.
absl::StatusOr<int64_t> NextVersion(const std::string& dir);

// What RemoveStaleTemporaries found.
struct StaleTemporaries {
  std::vector<std::string> removed;  // the paths removed
  std::vector<std::string> kept;     // "PATH: why" for each left in place
};

// Removes the entries of `dir` named .tmp-* that no save is writing: a save's temporary directory
// (or anything else of that name) left by a server that stopped mid-write. One that a running
// server's save holds locked is kept, as is one that cannot be removed. NOT_FOUND when `dir`
// cannot be read. For start-up: a save that is making its temporary directory at that moment (in
// the instant before it locks it) may lose it and fail INTERNAL, and never leaves a version.
absl::StatusOr<StaleTemporaries> RemoveStaleTemporaries(const std::string& dir);

// Opens the newest version of spec.path (a version directory) that passes TableSource::Open's
// checks; each newer one that does not is skipped, and `skipped` gets one line per skip saying
// why (a missing or extra table file, a defect of the file). The source knows its directory and
// version (TableSource::version()). INVALID_ARGUMENT (naming the directory and every skip) when no
// version opens.
absl::StatusOr<std::unique_ptr<TableSource>> OpenNewestVersion(const TableSpec& spec,
                                                               std::vector<std::string>* skipped);

// Opens version `version` of spec.path (a version directory), as OpenNewestVersion opens one.
// NOT_FOUND when DIR/<version> does not exist; INVALID_ARGUMENT naming its defect.
absl::StatusOr<std::unique_ptr<TableSource>> OpenVersion(const TableSpec& spec, int64_t version);

// What WriteVersion writes and where.
struct VersionFile {
  int64_t version = 0;
  std::string path;  // the file, under its final name
  size_t bytes = 0;
};

// Writes the next version of `dir` (NextVersion) as one .safetensors file named after the tensor
// (`tensor`, else the table's name): rows x dim elements of `dtype`, with `sequence` in its
// metadata. The rows come from `read(offset, out)`, called for consecutive chunks of the data.
// Written to DIR/.tmp-N-PID-TOKEN/ (locked while it is written), the file and that directory
// synced, then renamed to DIR/N and DIR synced. NextVersion's errors; INTERNAL (naming the path
// and the errno) when any step of the write fails: the temporary directory is then removed, and
// no version appears.
absl::StatusOr<VersionFile> WriteVersion(
    const std::string& dir, const std::string& tensor, int64_t rows, int64_t dim, DataType dtype,
    int64_t sequence,
    absl::FunctionRef<absl::Status(size_t offset, absl::Span<std::byte> out)> read);

}  // namespace emb::service

#endif  // EMB_SERVICE_TABLES_TABLE_VERSIONS_H_
