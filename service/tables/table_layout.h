// What a table file's header says, and the checks every format shares. The formats themselves:
// npy_format.cc, safetensors_format.cc.
#ifndef EMB_SERVICE_TABLES_TABLE_LAYOUT_H_
#define EMB_SERVICE_TABLES_TABLE_LAYOUT_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "kernels/data_type.h"
#include "service/tables/table_spec.h"

namespace emb::service {

// What a table file's header says: the rows start at data_offset.
struct TableLayout {
  int64_t rows = 0;
  int64_t dim = 0;
  DataType dtype = DataType::kFloat32;
  size_t data_offset = 0;
  // The last update sequence applied to these rows, from a .safetensors file's metadata
  // ("emb_sequence", written by SaveTable), below kSequenceLimit; 0 where the file has none.
  int64_t sequence = 0;
};

// The checks TableSource::Open() makes, on a whole file held in memory: `file` is the file's
// bytes, `spec.path` (its ending picks the format; it is not opened) and `spec.tensor` are read
// as Open() reads them. The same errors as Open() for the same bytes (it cannot be NOT_FOUND).
// For tests and fuzzing (tests/fuzz/), which need no file.
absl::StatusOr<TableLayout> ParseTableFile(const TableSpec& spec, absl::string_view file);

// --- For the format parsers (npy_format.cc, safetensors_format.cc) ---

// Copies file bytes [offset, offset + dst.size()) into dst: a pread of the open file, or a copy
// from the bytes ParseTableFile() was given. INTERNAL past the end or on a read error.
using ReadAt = absl::FunctionRef<absl::Status(size_t offset, absl::Span<std::byte> dst)>;

// Every check of a file's header, whatever holds the file's `file_size` bytes: the format by the
// path's ending, then the sizes against the file. TableSource::Open() and ParseTableFile() both
// come here.
absl::StatusOr<TableLayout> ParseLayout(const TableSpec& spec, size_t file_size, ReadAt read);

// The bytes of `rows` rows of `dim` elements of `t` (RowBytes) into *out; false when that
// overflows size_t or int64.
bool TableBytes(int64_t rows, int64_t dim, DataType t, size_t* out);

// INVALID_ARGUMENT "PATH: WHAT": how every defect of a table file is reported.
absl::Status Defect(absl::string_view path, absl::string_view what);

// Checks rank 2 and positive dims; on success fills layout->rows and layout->dim.
absl::Status CheckShape(absl::string_view path, const std::vector<int64_t>& shape,
                        TableLayout* layout);

// What a .npy file's header says (version 1 to 3), whatever its type and rank: the type string
// without its quotes ("<f4"), the order, the shape, and where the data starts (not checked
// against the file's size).
struct NpyArrayHeader {
  std::string descr;
  bool fortran_order = false;
  std::vector<int64_t> shape;
  size_t data_offset = 0;
};
absl::StatusOr<NpyArrayHeader> ParseNpyHeader(absl::string_view path, ReadAt read,
                                              size_t file_size);

// The header of a .npy table (version 1 to 3, C order, little-endian f4/f2).
absl::StatusOr<TableLayout> ParseNpy(absl::string_view path, ReadAt read, size_t file_size);

// The metadata key of a .safetensors table's last applied update sequence (a decimal string, as
// safetensors metadata values are strings).
inline constexpr char kSequenceMetadataKey[] = "emb_sequence";
// The metadata keys of a quantized table: a U8 tensor [rows, row bytes] whose rows are in the
// layout named by "emb_layout" ("int8_rowwise" or "int4_rowwise", kernels/quantize.h), of
// "emb_dim" elements (optional for int8; needed for int4 rows of odd dim, else 2 x the levels'
// bytes).
inline constexpr char kLayoutMetadataKey[] = "emb_layout";
inline constexpr char kDimMetadataKey[] = "emb_dim";

// The header of a .safetensors file; `tensor` names the tensor (empty: the file's only one).
absl::StatusOr<TableLayout> ParseSafetensors(absl::string_view path, absl::string_view tensor,
                                             ReadAt read, size_t file_size);

}  // namespace emb::service

#endif  // EMB_SERVICE_TABLES_TABLE_LAYOUT_H_
