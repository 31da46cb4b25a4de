// libFuzzer target: the --table flag parser (ParseTableSpec). An accepted flag splits into a
// non-empty NAME (no '='), a non-empty PATH, the TENSOR after the last '#' before the options, and
// the options (quantize=int8|int4, gpu_budget=SIZE over 0, hot_ids=PATH; in any order, each at
// most once): PATH, TENSOR and hot_ids' PATH hold none of ",quantize=", ",gpu_budget=" and
// ",hot_ids=" (where the options start), and the flag written again with its options in one order
// parses to the same spec.
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "service/tables/table_source.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

bool HoldsAnOption(absl::string_view text) {
  return absl::StrContains(text, ",quantize=") || absl::StrContains(text, ",gpu_budget=") ||
         absl::StrContains(text, ",hot_ids=");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view flag(reinterpret_cast<const char*>(data), size);
  const absl::StatusOr<emb::service::TableSpec> spec = emb::service::ParseTableSpec(flag);
  if (!spec.ok()) {
    FUZZ_CHECK(spec.status().code() == absl::StatusCode::kInvalidArgument);
    return 0;
  }
  FUZZ_CHECK(!spec->name.empty() && spec->name.find('=') == std::string::npos);
  FUZZ_CHECK(!spec->path.empty());
  FUZZ_CHECK(spec->tensor.find('#') == std::string::npos);
  FUZZ_CHECK(!HoldsAnOption(spec->path) && !HoldsAnOption(spec->tensor) &&
             !HoldsAnOption(spec->hot_ids_path));
  const std::string head = absl::StrCat(spec->name, "=", spec->path);
  FUZZ_CHECK(absl::StartsWith(flag, head));
  const bool has_tensor = flag.substr(head.size(), 1) == "#";
  FUZZ_CHECK(has_tensor || spec->tensor.empty());
  const char* quantize = !spec->quantize.has_value()                      ? ""
                         : *spec->quantize == emb::DataType::kInt8Rowwise ? ",quantize=int8"
                                                                          : ",quantize=int4";
  const std::string again = absl::StrCat(
      head, has_tensor ? absl::StrCat("#", spec->tensor) : "", quantize,
      spec->gpu_budget_bytes > 0 ? absl::StrCat(",gpu_budget=", spec->gpu_budget_bytes) : "",
      spec->hot_ids_path.empty() ? "" : absl::StrCat(",hot_ids=", spec->hot_ids_path));
  const absl::StatusOr<emb::service::TableSpec> reparsed = emb::service::ParseTableSpec(again);
  FUZZ_CHECK(reparsed.ok());
  FUZZ_CHECK(reparsed->name == spec->name && reparsed->path == spec->path &&
             reparsed->tensor == spec->tensor && reparsed->quantize == spec->quantize &&
             reparsed->gpu_budget_bytes == spec->gpu_budget_bytes &&
             reparsed->hot_ids_path == spec->hot_ids_path);
  return 0;
}
