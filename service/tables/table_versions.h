// Version directories: a table given as --table=NAME=DIR is DIR/1/, DIR/2/, ... each holding one
// .npy or .safetensors file (with DIR#TENSOR, the tensor of that name in each). The newest version
// whose file passes the loader's checks is served; SaveTable writes the next one. A version is
// written under a temporary name (DIR/.tmp-N-PID/), synced, then renamed, so a name that is a
// number is a complete version unless the disk lies; anything else in DIR is ignored.
// Thread-compatible (no state; the file system is the state).
#ifndef EMB_SERVICE_TABLES_TABLE_VERSIONS_H_
#define EMB_SERVICE_TABLES_TABLE_VERSIONS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "kernels/data_type.h"
#include "service/tables/table_source.h"
#include "service/tables/table_spec.h"

namespace emb::service {

// True when `path` names a directory (a version directory, for --table).
bool IsDirectory(const std::string& path);

// The version numbers in `dir`, newest first: the subdirectories whose names are decimal
// numbers >= 1. NOT_FOUND when `dir` cannot be read.
absl::StatusOr<std::vector<int64_t>> ListVersions(const std::string& dir);

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

// Writes the next version of `dir` (one past the newest there) as one .safetensors file named
// after the tensor (`tensor`, else the table's name): rows x dim elements of `dtype`, with
// `sequence` in its metadata. The rows come from `read(offset, out)`, called for consecutive
// chunks of the data. Written to DIR/.tmp-N-PID/, the file and that directory synced, then
// renamed to DIR/N and DIR synced. INTERNAL (naming the path and the errno) when any step fails;
// the temporary directory is then removed, and no version appears.
absl::StatusOr<VersionFile> WriteVersion(
    const std::string& dir, const std::string& tensor, int64_t rows, int64_t dim, DataType dtype,
    int64_t sequence,
    absl::FunctionRef<absl::Status(size_t offset, absl::Span<std::byte> out)> read);

}  // namespace emb::service

#endif  // EMB_SERVICE_TABLES_TABLE_VERSIONS_H_
