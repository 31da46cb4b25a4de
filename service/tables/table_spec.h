// The --table flag: which file (and tensor) a table comes from.
#ifndef EMB_SERVICE_TABLES_TABLE_SPEC_H_
#define EMB_SERVICE_TABLES_TABLE_SPEC_H_

#include <cstddef>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "kernels/data_type.h"

namespace emb::service {

// One --table flag: NAME=PATH[#TENSOR][,quantize=int8|int4], where #TENSOR names a .safetensors
// file's tensor and `quantize` quantizes a float table row-wise as it loads (kernels/quantize.h).
struct TableSpec {
  std::string name;
  std::string path;
  std::string tensor;  // safetensors only; empty: the file's only tensor
  // kInt8Rowwise or kInt4Rowwise: the rows are quantized at load; nullopt: served as stored.
  std::optional<DataType> quantize;
};

// The longest table name, in bytes.
inline constexpr size_t kMaxTableNameBytes = 256;

// OK for a name of 1 to kMaxTableNameBytes bytes of printable UTF-8 (no control characters), which
// ListTables (a proto string), the logs and Prometheus label values can carry; else
// INVALID_ARGUMENT, naming the first bad byte.
absl::Status CheckTableName(absl::string_view name);

// Parses "NAME=PATH[#TENSOR][,quantize=int8|int4]". INVALID_ARGUMENT when the name or path is
// missing, the name fails CheckTableName, or the quantization is not int8 or int4.
absl::StatusOr<TableSpec> ParseTableSpec(absl::string_view flag);

}  // namespace emb::service

#endif  // EMB_SERVICE_TABLES_TABLE_SPEC_H_
