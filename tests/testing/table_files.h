// Builders for table files in tests: .npy and .safetensors bytes, random row data, and a
// temporary directory that removes itself.
//
// The builders return the file's bytes as a std::string, so a test can break them (cut, patch
// the magic) before WriteFile(). Typical use:
//
//   TempDir dir;
//   const std::string rows = RandomRows(DataType::kFloat32, 3 * 4, /*seed=*/1);
//   const std::string path = dir.File("t.npy");
//   ASSERT_THAT(WriteFile(path, NpyFile("<f4", {3, 4}, rows)), IsOk());
//
// Thread-compatible; everything here is header-only.
#ifndef EMB_TESTS_TESTING_TABLE_FILES_H_
#define EMB_TESTS_TESTING_TABLE_FILES_H_

#include <stdlib.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "kernels/data_type.h"

namespace emb::testing {

// A fresh directory under $TEST_TMPDIR (or /tmp), removed with everything in it when destroyed.
// Aborts the test binary if the directory can't be made (the machine, not the code, is broken).
class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("TEST_TMPDIR");
    std::string pattern =
        absl::StrCat(base != nullptr && *base != '\0' ? base : "/tmp", "/emb_test_XXXXXX");
    if (mkdtemp(pattern.data()) == nullptr) {
      std::perror("TempDir: mkdtemp");
      std::abort();
    }
    path_ = std::move(pattern);
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  // path()/name; the file itself is not created.
  std::string File(absl::string_view name) const { return absl::StrCat(path_, "/", name); }

 private:
  std::string path_;
};

// Writes `bytes` to `path`, replacing any file there. INTERNAL when it can't.
inline absl::Status WriteFile(const std::string& path, absl::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) {
    return absl::InternalError(absl::StrCat("cannot write ", path));
  }
  return absl::OkStatus();
}

// `count` elements of `type` (little-endian), drawn from +-[0.25, 1) and rounded to `type`: finite
// and never zero, so a row read from the wrong place shows. The same seed gives the same bytes.
inline std::string RandomRows(DataType type, int64_t count, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> magnitude(0.25f, 1.0f);
  std::string bytes(static_cast<size_t>(count) * ElementSize(type), '\0');
  for (int64_t i = 0; i < count; ++i) {
    const float v = (rng() & 1) != 0 ? magnitude(rng) : -magnitude(rng);
    StoreFromFloat(bytes.data(), type, i, v);
  }
  return bytes;
}

// --- .npy --------------------------------------------------------------------------------------

// The header dict, e.g. "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }".
// A one-element shape is written "(5,)", as numpy does.
inline std::string NpyDict(absl::string_view descr, const std::vector<int64_t>& shape,
                           bool fortran_order = false) {
  std::string dims = absl::StrJoin(shape, ", ");
  if (shape.size() == 1) {
    dims += ",";
  }
  return absl::StrCat("{'descr': '", descr,
                      "', 'fortran_order': ", fortran_order ? "True" : "False", ", 'shape': (",
                      dims, "), }");
}

// Magic, version `major`.0, header length (2 bytes in v1, 4 in v2/v3), then `dict` padded with
// spaces and a final '\n' so that the data starts at a multiple of 64, as numpy writes it.
inline std::string NpyHeader(absl::string_view dict, int major = 1) {
  const size_t prefix = major == 1 ? 10 : 12;
  std::string text(dict);
  const size_t unpadded = prefix + text.size() + 1;
  text.append((64 - unpadded % 64) % 64, ' ');
  text.push_back('\n');
  std::string out("\x93NUMPY", 6);
  out.push_back(static_cast<char>(major));
  out.push_back('\0');
  const size_t len = text.size();
  out.push_back(static_cast<char>(len & 0xff));
  out.push_back(static_cast<char>((len >> 8) & 0xff));
  if (major != 1) {
    out.push_back(static_cast<char>((len >> 16) & 0xff));
    out.push_back(static_cast<char>((len >> 24) & 0xff));
  }
  return out + text;
}

// A whole .npy file: NpyHeader(NpyDict(descr, shape), major) followed by `data`.
inline std::string NpyFile(absl::string_view descr, const std::vector<int64_t>& shape,
                           absl::string_view data, int major = 1) {
  return absl::StrCat(NpyHeader(NpyDict(descr, shape), major), data);
}

// A 1-D .npy of row ids (as the hot_ids= option of --table takes them): little-endian int64
// ("<i8"), or int32 ("<i4", each id cut to 32 bits) where `int32` is set.
inline std::string IdsNpyFile(const std::vector<int64_t>& ids, bool int32 = false) {
  std::string data;
  for (const int64_t id : ids) {
    const auto bits = static_cast<uint64_t>(id);
    for (int byte = 0; byte < (int32 ? 4 : 8); ++byte) {
      data.push_back(static_cast<char>((bits >> (8 * byte)) & 0xff));
    }
  }
  return NpyFile(int32 ? "<i4" : "<i8", {static_cast<int64_t>(ids.size())}, data);
}

// --- .safetensors ------------------------------------------------------------------------------

struct SafetensorsTensor {
  std::string name;
  std::string dtype;  // "F32", "F16", "BF16", "I64", ...
  std::vector<int64_t> shape;
  std::string data;  // its bytes; data_offsets are laid out from these sizes
};

// The JSON header for `tensors`, stored one after another in the given order.
inline std::string SafetensorsHeaderJson(const std::vector<SafetensorsTensor>& tensors) {
  std::vector<std::string> entries;
  size_t offset = 0;
  for (const SafetensorsTensor& t : tensors) {
    entries.push_back(absl::StrCat("\"", t.name, "\":{\"dtype\":\"", t.dtype, "\",\"shape\":[",
                                   absl::StrJoin(t.shape, ","), "],\"data_offsets\":[", offset, ",",
                                   offset + t.data.size(), "]}"));
    offset += t.data.size();
  }
  return absl::StrCat("{", absl::StrJoin(entries, ","), "}");
}

// An 8-byte little-endian header length, `json` itself, then `data`: any header, even a broken one.
inline std::string SafetensorsFromHeader(absl::string_view json, absl::string_view data) {
  std::string out;
  for (int i = 0; i < 8; ++i) {
    out.push_back(static_cast<char>((uint64_t{json.size()} >> (8 * i)) & 0xff));
  }
  return absl::StrCat(out, json, data);
}

// A whole .safetensors file holding `tensors`.
inline std::string SafetensorsFile(const std::vector<SafetensorsTensor>& tensors) {
  std::string data;
  for (const SafetensorsTensor& t : tensors) {
    data += t.data;
  }
  return SafetensorsFromHeader(SafetensorsHeaderJson(tensors), data);
}

}  // namespace emb::testing

#endif  // EMB_TESTS_TESTING_TABLE_FILES_H_
