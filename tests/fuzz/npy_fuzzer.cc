// libFuzzer target: the .npy header parser (service/tables/table_source.h, ParseTableFile), on any
// bytes as a whole file. A file it accepts must hold its rows: rows, dim >= 1 and the data inside
// it.
#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "service/tables/table_source.h"
#include "tests/fuzz/fuzz_check.h"
#include "tests/fuzz/table_layout_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view file(reinterpret_cast<const char*>(data), size);
  emb::fuzz::CheckTableFile({"t", "fuzz.npy", "", {}}, file);
  // #TENSOR is for .safetensors only, whatever the bytes.
  const auto named = emb::service::ParseTableFile({"t", "fuzz.npy", "emb", {}}, file);
  FUZZ_CHECK(named.status().code() == absl::StatusCode::kInvalidArgument);
  return 0;
}
