// The --table flag: which file (and tensor) a table comes from.
#ifndef EMB_SERVICE_TABLES_TABLE_SPEC_H_
#define EMB_SERVICE_TABLES_TABLE_SPEC_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace emb::service {

// One --table flag: NAME=PATH, where PATH may end in #TENSOR for a .safetensors file.
struct TableSpec {
  std::string name;
  std::string path;
  std::string tensor;  // safetensors only; empty: the file's only tensor
};

// Parses "NAME=PATH[#TENSOR]". INVALID_ARGUMENT when the name or path is missing.
absl::StatusOr<TableSpec> ParseTableSpec(absl::string_view flag);

}  // namespace emb::service

#endif  // EMB_SERVICE_TABLES_TABLE_SPEC_H_
