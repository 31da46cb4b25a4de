// libFuzzer target: the .safetensors parser (service/tables/table_source.h, ParseTableFile), its
// JSON header included, on any bytes as a whole file: without #TENSOR (the file's only tensor) and
// with the tensor names the seeds use. A tensor it accepts lies inside the file.
#include <cstddef>
#include <cstdint>

#include "absl/strings/string_view.h"
#include "tests/fuzz/table_layout_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view file(reinterpret_cast<const char*>(data), size);
  for (const char* tensor : {"", "emb", "weight", "__metadata__"}) {
    emb::fuzz::CheckTableFile({"t", "fuzz.safetensors", tensor, {}}, file);
  }
  return 0;
}
