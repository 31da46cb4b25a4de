#include "service/tables/table_spec.h"

#include "absl/strings/str_cat.h"

namespace emb::service {

absl::StatusOr<TableSpec> ParseTableSpec(absl::string_view flag) {
  const size_t eq = flag.find('=');
  if (eq == absl::string_view::npos || eq == 0 || eq + 1 == flag.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--table=", flag, ": expected NAME=PATH[#TENSOR]"));
  }
  TableSpec spec;
  spec.name = std::string(flag.substr(0, eq));
  absl::string_view path = flag.substr(eq + 1);
  if (const size_t hash = path.rfind('#'); hash != absl::string_view::npos) {
    spec.tensor = std::string(path.substr(hash + 1));
    path = path.substr(0, hash);
  }
  if (path.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--table=", flag, ": expected NAME=PATH[#TENSOR]; the path is missing"));
  }
  spec.path = std::string(path);
  return spec;
}

}  // namespace emb::service
