#include "service/tables/hot_ids.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "service/common/regular_file.h"
#include "service/common/status_macros.h"
#include "service/tables/table_layout.h"

namespace emb::service {

absl::StatusOr<std::vector<int64_t>> ParseHotIds(absl::string_view path, absl::string_view file,
                                                 int64_t rows) {
  const auto read = [&](size_t offset, absl::Span<std::byte> dst) {
    if (offset > file.size() || dst.size() > file.size() - offset) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": cut .npy file: it ends at byte ", file.size()));
    }
    if (!dst.empty()) {
      std::memcpy(dst.data(), file.data() + offset, dst.size());
    }
    return absl::OkStatus();
  };
  ASSIGN_OR_RETURN(const NpyArrayHeader header, ParseNpyHeader(path, read, file.size()));
  size_t width = 0;
  if (header.descr == "<i8") {
    width = 8;
  } else if (header.descr == "<i4") {
    width = 4;
  } else {
    return Defect(path,
                  absl::StrCat("unsupported dtype '", header.descr,
                               "'; hot ids must be little-endian int64 (<i8) or int32 (<i4)"));
  }
  if (header.shape.size() != 1 || header.shape[0] < 0) {
    return Defect(path, absl::StrCat("shape (", absl::StrJoin(header.shape, ", "),
                                     "); hot ids must be a 1-D array of row ids"));
  }
  const auto count = static_cast<uint64_t>(header.shape[0]);
  const size_t data = file.size() - std::min(file.size(), header.data_offset);
  if (count > data / width || data != count * width) {
    return Defect(path, absl::StrCat("holds ", data, " bytes of data, not the ", count, " ids of ",
                                     width, " bytes that its shape (", count, ",) says"));
  }
  std::vector<int64_t> ids(count);
  const char* p = file.data() + header.data_offset;
  for (size_t i = 0; i < count; ++i) {
    int64_t id = 0;
    if (width == 8) {
      std::memcpy(&id, p + i * 8, 8);
    } else {
      int32_t narrow = 0;
      std::memcpy(&narrow, p + i * 4, 4);
      id = narrow;
    }
    if (id < 0 || id >= rows) {
      return Defect(path, absl::StrCat("id ", id, " (at position ", i,
                                       ") is out of range for a table of ", rows, " rows"));
    }
    ids[i] = id;
  }
  return ids;
}

absl::StatusOr<std::vector<int64_t>> ReadHotIds(const std::string& path, int64_t rows) {
  constexpr size_t kMaxHeaderBytes = size_t{1} << 20;
  constexpr size_t kMaxRows = (std::numeric_limits<size_t>::max() - kMaxHeaderBytes) / 8;
  const size_t max_bytes = kMaxHeaderBytes + 8 * std::min(kMaxRows, static_cast<size_t>(rows));
  struct stat st;
  ASSIGN_OR_RETURN(const int fd, OpenRegularFile(path, &st));
  close(fd);
  if (static_cast<size_t>(st.st_size) > max_bytes) {
    return Defect(
        path, absl::StrCat(st.st_size, " bytes, more than the ids of a table of ", rows,
                           " rows need (", max_bytes, ": 8 bytes a row and 1 MiB for the header)"));
  }
  ASSIGN_OR_RETURN(const std::string file, ReadRegularFile(path, max_bytes));
  return ParseHotIds(path, file, rows);
}

}  // namespace emb::service
