// libFuzzer target: the --table flag parser (ParseTableSpec). An accepted flag splits into a
// non-empty NAME (no '='), a non-empty PATH, the TENSOR after the last '#' and an optional
// trailing ",quantize=int8|int4", which put back together give the flag again.
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "service/tables/table_source.h"
#include "tests/fuzz/fuzz_check.h"

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
  const bool has_tensor = flag.substr(spec->name.size() + 1).find('#') != absl::string_view::npos;
  const char* quantize = !spec->quantize.has_value()                      ? ""
                         : *spec->quantize == emb::DataType::kInt8Rowwise ? ",quantize=int8"
                                                                          : ",quantize=int4";
  const std::string again =
      has_tensor ? absl::StrCat(spec->name, "=", spec->path, "#", spec->tensor, quantize)
                 : absl::StrCat(spec->name, "=", spec->path, quantize);
  FUZZ_CHECK(again == flag);
  return 0;
}
