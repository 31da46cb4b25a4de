// Shared by the table file fuzzers: parses `file` as `spec` says and checks what an accepted
// layout promises (TableSource::Open would then read rows x dim elements from data_offset).
#ifndef EMB_TESTS_FUZZ_TABLE_LAYOUT_CHECK_H_
#define EMB_TESTS_FUZZ_TABLE_LAYOUT_CHECK_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/string_view.h"
#include "kernels/data_type.h"
#include "service/tables/table_source.h"
#include "tests/fuzz/fuzz_check.h"

namespace emb::fuzz {

inline void CheckTableFile(const service::TableSpec& spec, absl::string_view file) {
  const absl::StatusOr<service::TableLayout> layout = service::ParseTableFile(spec, file);
  if (!layout.ok()) {
    // Every defect is INVALID_ARGUMENT and names the file.
    FUZZ_CHECK(layout.status().code() == absl::StatusCode::kInvalidArgument);
    FUZZ_CHECK(absl::StartsWith(layout.status().message(), spec.path));
    return;
  }
  FUZZ_CHECK(layout->rows >= 1 && layout->dim >= 1);
  FUZZ_CHECK(IsDataType(layout->dtype));
  // A quantized row is its levels plus a scale and bias (RowBytes); a value row dim elements.
  const unsigned __int128 row =
      IsQuantized(layout->dtype)
          ? static_cast<unsigned __int128>(RowBytes(layout->dtype, layout->dim))
          : static_cast<unsigned __int128>(static_cast<uint64_t>(layout->dim)) *
                ElementSize(layout->dtype);
  const unsigned __int128 bytes = static_cast<unsigned __int128>(layout->rows) * row;
  FUZZ_CHECK(layout->data_offset <= file.size());
  FUZZ_CHECK(bytes <= file.size() - layout->data_offset);
}

}  // namespace emb::fuzz

#endif  // EMB_TESTS_FUZZ_TABLE_LAYOUT_CHECK_H_
