// Reading .npy files (NumPy's format, versions 1 to 3) for the CLI's `update`: the ids and rows
// to write. Only C-order arrays of little-endian (or one-byte) elements; the element type is
// left to the caller, as NumPy's descr string ("<f4", "<i8", "|V2", ...).
// https://numpy.org/doc/stable/reference/generated/numpy.lib.format.html
#ifndef EMB_CLIENT_NPY_FILE_H_
#define EMB_CLIENT_NPY_FILE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace emb::client {

struct NpyArray {
  std::string descr;           // e.g. "<f4"; "|" for one-byte and void elements ("|V2")
  size_t element_size = 0;     // bytes per element, from descr
  std::vector<int64_t> shape;  // () for a scalar
  std::string data;            // prod(shape) elements, row-major
};

// Parses the bytes of a .npy file; `name` (its path) is used in errors. INVALID_ARGUMENT, naming
// the file and the problem, for a bad magic or version, a cut or malformed header, Fortran
// order (with more than one dimension), big-endian elements, or data shorter or longer than the
// shape says.
absl::StatusOr<NpyArray> ParseNpy(absl::string_view bytes, absl::string_view name);

// Reads and parses the .npy file at `path`; NOT_FOUND if it cannot be read.
absl::StatusOr<NpyArray> ReadNpy(const std::string& path);

}  // namespace emb::client

#endif  // EMB_CLIENT_NPY_FILE_H_
