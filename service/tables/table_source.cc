#include "service/tables/table_source.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <map>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "service/common/status_macros.h"

namespace emb::service {
namespace {

absl::Status Defect(absl::string_view path, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": ", what));
}

// a * b, false when it overflows size_t.
bool MulOverflows(size_t a, size_t b, size_t* out) { return __builtin_mul_overflow(a, b, out); }

// The bytes of rows x dim elements of `t`, or false on overflow.
bool TableBytes(int64_t rows, int64_t dim, DataType t, size_t* out) {
  size_t n;
  return !MulOverflows(static_cast<size_t>(rows), static_cast<size_t>(dim), &n) &&
         !MulOverflows(n, ElementSize(t), out) &&
         *out <= static_cast<size_t>(std::numeric_limits<int64_t>::max());
}

absl::Status PreadAll(int fd, size_t offset, absl::Span<std::byte> dst, absl::string_view path) {
  size_t done = 0;
  while (done < dst.size()) {
    const ssize_t n = pread(fd, dst.data() + done, dst.size() - done, offset + done);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      return absl::InternalError(absl::StrCat(path, ": read failed at byte ", offset + done, ": ",
                                              n == 0 ? "unexpected end of file" : strerror(errno)));
    }
    done += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

// Copies file bytes [offset, offset + dst.size()) into dst: a pread of the open file, or a copy
// from the bytes ParseTableFile() was given. INTERNAL past the end or on a read error.
using ReadAt = absl::FunctionRef<absl::Status(size_t offset, absl::Span<std::byte> dst)>;

// --- A minimal JSON reader, enough for a safetensors header. ---------------------------------

struct Json {
  enum Kind { kNull, kBool, kNumber, kString, kArray, kObject } kind = kNull;
  std::string str;  // kString; kNumber keeps its text so int64 values stay exact
  std::vector<Json> items;
  std::map<std::string, Json> fields;
};

class JsonParser {
 public:
  explicit JsonParser(absl::string_view text) : s_(text) {}

  bool Parse(Json* out) {
    if (!Value(out, 0)) {
      return false;
    }
    SkipSpace();
    return pos_ == s_.size();
  }

 private:
  void SkipSpace() {
    while (pos_ < s_.size() && absl::ascii_isspace(static_cast<unsigned char>(s_[pos_]))) {
      ++pos_;
    }
  }
  bool Eat(char c) {
    SkipSpace();
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  bool String(std::string* out) {
    if (!Eat('"')) {
      return false;
    }
    while (pos_ < s_.size() && s_[pos_] != '"') {
      if (s_[pos_] == '\\') {  // keep escapes verbatim: names with escapes are not ours to read
        out->push_back(s_[pos_++]);
        if (pos_ >= s_.size()) {
          return false;
        }
      }
      out->push_back(s_[pos_++]);
    }
    return pos_++ < s_.size();
  }
  bool Value(Json* out, int depth) {
    if (depth > 16) {
      return false;
    }
    SkipSpace();
    if (pos_ >= s_.size()) {
      return false;
    }
    const char c = s_[pos_];
    if (c == '"') {
      out->kind = Json::kString;
      return String(&out->str);
    }
    if (c == '{') {
      out->kind = Json::kObject;
      ++pos_;
      if (Eat('}')) {
        return true;
      }
      do {
        std::string key;
        if (!String(&key) || !Eat(':') || !Value(&out->fields[key], depth + 1)) {
          return false;
        }
      } while (Eat(','));
      return Eat('}');
    }
    if (c == '[') {
      out->kind = Json::kArray;
      ++pos_;
      if (Eat(']')) {
        return true;
      }
      do {
        out->items.emplace_back();
        if (!Value(&out->items.back(), depth + 1)) {
          return false;
        }
      } while (Eat(','));
      return Eat(']');
    }
    for (absl::string_view word : {"true", "false", "null"}) {
      if (s_.substr(pos_, word.size()) == word) {
        out->kind = word == "null" ? Json::kNull : Json::kBool;
        out->str = std::string(word);
        pos_ += word.size();
        return true;
      }
    }
    const size_t start = pos_;
    while (pos_ < s_.size() && (absl::ascii_isdigit(static_cast<unsigned char>(s_[pos_])) ||
                                std::strchr("+-.eE", s_[pos_]) != nullptr)) {
      ++pos_;
    }
    out->kind = Json::kNumber;
    out->str = std::string(s_.substr(start, pos_ - start));
    return pos_ > start;
  }

  absl::string_view s_;
  size_t pos_ = 0;
};

bool JsonInt(const Json& j, int64_t* out) {
  return j.kind == Json::kNumber && absl::SimpleAtoi(j.str, out);
}

// Checks rank 2 and positive dims; on success fills rows and dim.
absl::Status CheckShape(absl::string_view path, const std::vector<int64_t>& shape,
                        TableLayout* layout) {
  if (shape.size() != 2) {
    return Defect(path, absl::StrCat("rank ", shape.size(), " (shape [", absl::StrJoin(shape, ", "),
                                     "]); an embedding table must be 2-D [rows, dim]"));
  }
  if (shape[0] <= 0 || shape[1] <= 0) {
    return Defect(path, absl::StrCat("shape [", shape[0], ", ", shape[1],
                                     "] has a zero or negative dimension"));
  }
  layout->rows = shape[0];
  layout->dim = shape[1];
  return absl::OkStatus();
}

absl::StatusOr<TableLayout> ParseNpy(absl::string_view path, ReadAt read, size_t file_size) {
  constexpr size_t kPrefix = 10;  // magic (6), version (2), header length (2 in v1)
  if (file_size < kPrefix) {
    return Defect(path, absl::StrCat("cut .npy header: the file has ", file_size, " bytes"));
  }
  unsigned char prefix[12] = {};
  RETURN_IF_ERROR(read(0, absl::MakeSpan(reinterpret_cast<std::byte*>(prefix), kPrefix)));
  if (std::memcmp(prefix, "\x93NUMPY", 6) != 0) {
    return Defect(path, "bad magic: not a .npy file (expected \\x93NUMPY)");
  }
  const int major = prefix[6];
  size_t header_len;
  size_t header_start;
  if (major == 1) {
    header_len = prefix[8] | (size_t{prefix[9]} << 8);
    header_start = 10;
  } else if (major == 2 || major == 3) {
    if (file_size < 12) {
      return Defect(path, "cut .npy header");
    }
    RETURN_IF_ERROR(read(10, absl::MakeSpan(reinterpret_cast<std::byte*>(prefix + 10), 2)));
    header_len = prefix[8] | (size_t{prefix[9]} << 8) | (size_t{prefix[10]} << 16) |
                 (size_t{prefix[11]} << 24);
    header_start = 12;
  } else {
    return Defect(path, absl::StrCat("unsupported .npy format version ", major));
  }
  if (header_start + header_len > file_size) {
    return Defect(path, absl::StrCat("cut .npy header: it declares ", header_len,
                                     " bytes but the file ends at ", file_size));
  }
  std::string header(header_len, '\0');
  RETURN_IF_ERROR(
      read(header_start, absl::MakeSpan(reinterpret_cast<std::byte*>(header.data()), header_len)));

  // The header is a Python dict literal: {'descr': '<f4', 'fortran_order': False, 'shape': (R, C),
  // }
  auto field = [&](absl::string_view key) -> absl::string_view {
    const size_t k = header.find(absl::StrCat("'", key, "'"));
    if (k == std::string::npos) {
      return {};
    }
    const size_t colon = header.find(':', k);
    return colon == std::string::npos ? absl::string_view()
                                      : absl::string_view(header).substr(colon + 1);
  };
  absl::string_view descr = absl::StripLeadingAsciiWhitespace(field("descr"));
  absl::string_view order = absl::StripLeadingAsciiWhitespace(field("fortran_order"));
  absl::string_view shape_text = absl::StripLeadingAsciiWhitespace(field("shape"));
  if (descr.empty() || order.empty() || shape_text.empty() || shape_text[0] != '(') {
    return Defect(path, "cut or malformed .npy header (needs descr, fortran_order and shape)");
  }
  TableLayout layout;
  if (absl::StartsWith(descr, "'<f4'")) {
    layout.dtype = DataType::kFloat32;
  } else if (absl::StartsWith(descr, "'<f2'")) {
    layout.dtype = DataType::kFloat16;
  } else {
    const size_t end = descr.find('\'', 1);
    return Defect(path, absl::StrCat("unsupported dtype ", descr.substr(0, end + 1),
                                     "; .npy tables must be little-endian float32 (<f4) or "
                                     "float16 (<f2)"));
  }
  if (!absl::StartsWith(order, "False")) {
    return Defect(path, "fortran_order is True; tables must be C order (row-major)");
  }
  const size_t close = shape_text.find(')');
  if (close == absl::string_view::npos) {
    return Defect(path, "cut or malformed .npy header: unterminated shape");
  }
  std::vector<int64_t> shape;
  for (absl::string_view part :
       absl::StrSplit(shape_text.substr(1, close - 1), ',', absl::SkipWhitespace())) {
    int64_t v;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(part), &v)) {
      return Defect(path,
                    absl::StrCat("shape dimension '", part, "' is not an integer or overflows"));
    }
    shape.push_back(v);
  }
  RETURN_IF_ERROR(CheckShape(path, shape, &layout));
  layout.data_offset = header_start + header_len;
  return layout;
}

absl::StatusOr<TableLayout> ParseSafetensors(absl::string_view path, absl::string_view tensor,
                                             ReadAt read, size_t file_size) {
  if (file_size < 8) {
    return Defect(path, absl::StrCat("cut safetensors header: the file has ", file_size, " bytes"));
  }
  unsigned char len_bytes[8];
  RETURN_IF_ERROR(read(0, absl::MakeSpan(reinterpret_cast<std::byte*>(len_bytes), 8)));
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) {
    header_len = (header_len << 8) | len_bytes[i];
  }
  if (header_len > file_size - 8) {
    return Defect(path, absl::StrCat("cut safetensors header: it declares ", header_len,
                                     " bytes but the file has ", file_size - 8, " after it"));
  }
  if (header_len > (size_t{100} << 20)) {
    return Defect(path,
                  absl::StrCat("safetensors header of ", header_len, " bytes exceeds 100 MiB"));
  }
  std::string text(header_len, '\0');
  RETURN_IF_ERROR(read(8, absl::MakeSpan(reinterpret_cast<std::byte*>(text.data()), header_len)));
  Json header;
  if (!JsonParser(text).Parse(&header) || header.kind != Json::kObject || text.empty() ||
      text[0] != '{') {
    return Defect(path, "bad magic: the safetensors header is not a JSON object");
  }
  std::vector<std::string> names;
  for (const auto& [name, value] : header.fields) {
    if (name != "__metadata__") {
      names.push_back(name);
    }
  }
  std::string chosen(tensor);
  if (chosen.empty()) {
    if (names.size() != 1) {
      return Defect(path, absl::StrCat("holds ", names.size(), " tensors (",
                                       absl::StrJoin(names, ", "), "); pick one with PATH#TENSOR"));
    }
    chosen = names[0];
  }
  auto it = header.fields.find(chosen);
  if (it == header.fields.end() || chosen == "__metadata__") {
    return Defect(path, absl::StrCat("no tensor named '", chosen, "' (it holds ",
                                     absl::StrJoin(names, ", "), ")"));
  }
  const Json& t = it->second;
  auto dtype = t.fields.find("dtype");
  auto shape = t.fields.find("shape");
  auto offsets = t.fields.find("data_offsets");
  if (t.kind != Json::kObject || dtype == t.fields.end() || shape == t.fields.end() ||
      offsets == t.fields.end() || shape->second.kind != Json::kArray ||
      offsets->second.kind != Json::kArray || offsets->second.items.size() != 2) {
    return Defect(path, absl::StrCat("tensor '", chosen,
                                     "' lacks dtype, shape or data_offsets [begin, end]"));
  }
  TableLayout layout;
  const std::string& dt = dtype->second.str;
  if (dt == "F32") {
    layout.dtype = DataType::kFloat32;
  } else if (dt == "F16") {
    layout.dtype = DataType::kFloat16;
  } else if (dt == "BF16") {
    layout.dtype = DataType::kBFloat16;
  } else {
    return Defect(path, absl::StrCat("tensor '", chosen, "' has unsupported dtype ", dt,
                                     "; tables must be F32, F16 or BF16"));
  }
  std::vector<int64_t> dims;
  for (const Json& d : shape->second.items) {
    int64_t v;
    if (!JsonInt(d, &v)) {
      return Defect(path, absl::StrCat("tensor '", chosen, "' has a non-integer shape entry"));
    }
    dims.push_back(v);
  }
  RETURN_IF_ERROR(CheckShape(path, dims, &layout));
  int64_t begin;
  int64_t end;
  if (!JsonInt(offsets->second.items[0], &begin) || !JsonInt(offsets->second.items[1], &end) ||
      begin < 0 || end < begin) {
    return Defect(path, absl::StrCat("tensor '", chosen, "' has invalid data_offsets"));
  }
  size_t need;
  if (!TableBytes(layout.rows, layout.dim, layout.dtype, &need)) {
    return Defect(path, absl::StrCat("shape [", layout.rows, ", ", layout.dim, "] of ", dt,
                                     " overflows 64-bit sizes"));
  }
  if (static_cast<size_t>(end - begin) != need) {
    return Defect(path, absl::StrCat("tensor '", chosen, "' data_offsets span ", end - begin,
                                     " bytes but shape [", layout.rows, ", ", layout.dim, "] of ",
                                     dt, " needs ", need));
  }
  layout.data_offset = 8 + header_len + static_cast<size_t>(begin);
  return layout;
}

uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Demo element i: uniform in [-1, 1), a pure function of (seed, i) so any range can be made alone.
float DemoValue(uint64_t seed, uint64_t i) {
  const uint64_t r = SplitMix64(seed * 0x100000001b3ull ^ i);
  return static_cast<float>(r >> 40) * (2.0f / 16777216.0f) - 1.0f;
}

// Rows in anonymous memory, 2 MiB aligned and backed by huge pages where the kernel allows: a
// gather touches rows at random, and with 4 KiB pages nearly every row costs a TLB miss (a two-
// level page walk under a hypervisor).
class HugePageRows final : public HostRows {
 public:
  static absl::StatusOr<std::unique_ptr<HugePageRows>> Allocate(size_t bytes,
                                                                absl::string_view what) {
    constexpr size_t kHugePage = size_t{2} << 20;
    const size_t length = std::max(kHugePage, (bytes + kHugePage - 1) / kHugePage * kHugePage);
    // Over-allocate by one huge page so that the start can be aligned to one.
    void* base = mmap(nullptr, length + kHugePage, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED) {
      return absl::ResourceExhaustedError(absl::StrCat(what, ": cannot allocate ", bytes,
                                                       " bytes of host memory: ", strerror(errno)));
    }
    auto rows = std::unique_ptr<HugePageRows>(new HugePageRows(base, length + kHugePage));
    const uintptr_t aligned =
        (reinterpret_cast<uintptr_t>(base) + kHugePage - 1) / kHugePage * kHugePage;
    rows->data_ = reinterpret_cast<std::byte*>(aligned);
    (void)madvise(rows->data_, length, MADV_HUGEPAGE);  // a hint: without THP, 4 KiB pages
    return rows;
  }
  ~HugePageRows() override { munmap(base_, length_); }
  const std::byte* data() const override { return data_; }
  std::byte* mutable_data() { return data_; }

 private:
  HugePageRows(void* base, size_t length) : base_(base), length_(length) {}
  void* base_;
  size_t length_;
  std::byte* data_ = nullptr;
};

// Every check of a file's header, whatever holds the file's `file_size` bytes.
absl::StatusOr<TableLayout> ParseLayout(const TableSpec& spec, size_t file_size, ReadAt read) {
  const std::string& path = spec.path;
  if (file_size == 0) {
    return Defect(path, "empty file");
  }
  TableLayout layout;
  if (absl::EndsWith(path, ".npy")) {
    if (!spec.tensor.empty()) {
      return Defect(path, "#TENSOR applies only to .safetensors files");
    }
    ASSIGN_OR_RETURN(layout, ParseNpy(path, read, file_size));
  } else if (absl::EndsWith(path, ".safetensors")) {
    ASSIGN_OR_RETURN(layout, ParseSafetensors(path, spec.tensor, read, file_size));
  } else {
    return Defect(path, "unknown format: the name must end in .npy or .safetensors");
  }
  size_t bytes;
  if (!TableBytes(layout.rows, layout.dim, layout.dtype, &bytes)) {
    return Defect(path, absl::StrCat("shape [", layout.rows, ", ", layout.dim, "] of ",
                                     DataTypeName(layout.dtype), " overflows 64-bit sizes"));
  }
  if (layout.data_offset > file_size || bytes > file_size - layout.data_offset) {
    return Defect(path,
                  absl::StrCat("truncated data: shape [", layout.rows, ", ", layout.dim, "] of ",
                               DataTypeName(layout.dtype), " needs ", bytes, " bytes from offset ",
                               layout.data_offset, " but the file has ", file_size));
  }
  return layout;
}

}  // namespace

absl::StatusOr<TableLayout> ParseTableFile(const TableSpec& spec, absl::string_view file) {
  return ParseLayout(spec, file.size(), [&](size_t offset, absl::Span<std::byte> dst) {
    if (offset > file.size() || dst.size() > file.size() - offset) {
      return absl::InternalError(absl::StrCat(spec.path, ": read failed at byte ", file.size(),
                                              ": unexpected end of file"));
    }
    if (!dst.empty()) {
      std::memcpy(dst.data(), file.data() + offset, dst.size());
    }
    return absl::OkStatus();
  });
}

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

absl::StatusOr<std::unique_ptr<TableSource>> TableSource::Open(const TableSpec& spec) {
  const std::string& path = spec.path;
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    const std::string message = absl::StrCat(path, ": cannot open: ", strerror(err));
    return err == ENOENT ? absl::NotFoundError(message) : absl::InvalidArgumentError(message);
  }
  auto source = std::unique_ptr<TableSource>(new TableSource());
  source->fd_ = fd;  // closed by the destructor from here on
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    return Defect(path, "not a regular file");
  }
  ASSIGN_OR_RETURN(const TableLayout layout,
                   ParseLayout(spec, static_cast<size_t>(st.st_size),
                               [fd, &path](size_t offset, absl::Span<std::byte> dst) {
                                 return PreadAll(fd, offset, dst, path);
                               }));
  source->name_ = spec.name;
  source->origin_ = spec.tensor.empty() ? path : absl::StrCat(path, "#", spec.tensor);
  source->rows_ = layout.rows;
  source->dim_ = layout.dim;
  source->dtype_ = layout.dtype;
  source->data_offset_ = layout.data_offset;
  return source;
}

std::unique_ptr<TableSource> TableSource::Demo(std::string name, int64_t rows, int64_t dim,
                                               uint64_t seed) {
  auto source = std::unique_ptr<TableSource>(new TableSource());
  source->name_ = std::move(name);
  source->origin_ = absl::StrCat("demo(seed=", seed, ")");
  source->rows_ = rows;
  source->dim_ = dim;
  source->dtype_ = DataType::kFloat32;
  source->demo_seed_ = seed;
  return source;
}

TableSource::~TableSource() {
  if (fd_ >= 0) {
    close(fd_);
  }
}

absl::Status TableSource::Read(size_t offset, absl::Span<std::byte> dst) const {
  if (offset > bytes() || dst.size() > bytes() - offset) {
    return absl::OutOfRangeError(
        absl::StrCat(origin_, ": read past the table's ", bytes(), " bytes"));
  }
  if (fd_ >= 0) {
    return PreadAll(fd_, data_offset_ + offset, dst, origin_);
  }
  // Demo rows are float32 made on the fly; copy the bytes of each element the range touches.
  size_t done = 0;
  while (done < dst.size()) {
    const size_t byte = offset + done;
    const float v = DemoValue(demo_seed_, byte / 4);
    const size_t skip = byte % 4;
    const size_t n = std::min<size_t>(4 - skip, dst.size() - done);
    std::memcpy(dst.data() + done, reinterpret_cast<const std::byte*>(&v) + skip, n);
    done += n;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<HostRows>> TableSource::ReadAll() const {
  ASSIGN_OR_RETURN(std::unique_ptr<HugePageRows> rows, HugePageRows::Allocate(bytes(), origin_));
  if (fd_ < 0) {
    RETURN_IF_ERROR(Read(0, absl::MakeSpan(rows->mutable_data(), bytes())));
    return rows;
  }
  // Map the file and read it once, sequentially, into the rows.
  const size_t length = data_offset_ + bytes();
  void* base = mmap(nullptr, length, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd_, 0);
  if (base == MAP_FAILED) {
    return absl::ResourceExhaustedError(
        absl::StrCat(origin_, ": mmap of ", length, " bytes failed: ", strerror(errno)));
  }
  (void)madvise(base, length, MADV_SEQUENTIAL);
  std::memcpy(rows->mutable_data(), static_cast<const std::byte*>(base) + data_offset_, bytes());
  munmap(base, length);
  return rows;
}

}  // namespace emb::service
