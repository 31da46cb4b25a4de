#include "service/tables/table_versions.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "service/common/status_macros.h"
#include "service/tables/table_layout.h"

namespace emb::service {
namespace {

absl::Status Errno(absl::string_view what, absl::string_view path) {
  return absl::InternalError(absl::StrCat(what, " ", path, ": ", strerror(errno)));
}

// The entries of `dir` (without "." and ".."). NOT_FOUND when it cannot be read.
absl::StatusOr<std::vector<std::string>> Entries(const std::string& dir) {
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) {
    return absl::NotFoundError(absl::StrCat("cannot read directory ", dir, ": ", strerror(errno)));
  }
  std::vector<std::string> names;
  while (const dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name != "." && name != "..") {
      names.push_back(name);
    }
  }
  closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

// The one table file (.npy or .safetensors) in a version's directory.
absl::StatusOr<std::string> TableFile(const std::string& version_dir) {
  ASSIGN_OR_RETURN(std::vector<std::string> names, Entries(version_dir));
  std::vector<std::string> files;
  for (const std::string& n : names) {
    if (absl::EndsWith(n, ".npy") || absl::EndsWith(n, ".safetensors")) {
      files.push_back(n);
    }
  }
  if (files.size() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(version_dir, ": holds ", files.size(), " table files (.npy or .safetensors)",
                     files.empty() ? "" : absl::StrCat(": ", absl::StrJoin(files, ", ")),
                     "; a version holds one"));
  }
  return absl::StrCat(version_dir, "/", files[0]);
}

// `text` as the inside of a JSON string (table names are printable: quotes and backslashes).
std::string JsonEscape(absl::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '"' || c == '\\') {
      out.push_back('\\');
    }
    out.push_back(c);
  }
  return out;
}

const char* SafetensorsDtype(DataType t) {
  switch (t) {
    case DataType::kFloat32:
      return "F32";
    case DataType::kFloat16:
      return "F16";
    case DataType::kInt8Rowwise:
    case DataType::kInt4Rowwise:
      return "U8";  // with the layout in the metadata
    case DataType::kBFloat16:
      break;
  }
  return "BF16";
}

absl::Status WriteAll(int fd, const std::byte* data, size_t n, const std::string& path) {
  while (n > 0) {
    const ssize_t w = write(fd, data, n);
    if (w < 0 && errno == EINTR) {
      continue;
    }
    if (w <= 0) {
      return Errno("write", path);
    }
    data += w;
    n -= static_cast<size_t>(w);
  }
  return absl::OkStatus();
}

absl::Status SyncPath(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    return Errno("open", path);
  }
  const int rc = fsync(fd);
  close(fd);
  return rc == 0 ? absl::OkStatus() : Errno("fsync", path);
}

void RemoveTree(const std::string& dir) {
  if (absl::StatusOr<std::vector<std::string>> names = Entries(dir); names.ok()) {
    for (const std::string& n : *names) {
      (void)unlink(absl::StrCat(dir, "/", n).c_str());
    }
  }
  (void)rmdir(dir.c_str());
}

}  // namespace

bool IsDirectory(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

absl::StatusOr<std::vector<int64_t>> ListVersions(const std::string& dir) {
  ASSIGN_OR_RETURN(std::vector<std::string> names, Entries(dir));
  std::vector<int64_t> versions;
  for (const std::string& n : names) {
    int64_t v = 0;
    const bool digits = !n.empty() && std::all_of(n.begin(), n.end(), absl::ascii_isdigit);
    if (digits && absl::SimpleAtoi(n, &v) && v >= 1 && IsDirectory(absl::StrCat(dir, "/", n))) {
      versions.push_back(v);
    }
  }
  std::sort(versions.rbegin(), versions.rend());
  return versions;
}

absl::StatusOr<std::unique_ptr<TableSource>> OpenVersion(const TableSpec& spec, int64_t version) {
  const std::string version_dir = absl::StrCat(spec.path, "/", version);
  if (!IsDirectory(version_dir)) {
    return absl::NotFoundError(absl::StrCat("table '", spec.name, "' has no version ", version,
                                            " (no directory ", version_dir, ")"));
  }
  ASSIGN_OR_RETURN(const std::string file, TableFile(version_dir));
  TableSpec file_spec{spec.name, file, spec.tensor, spec.quantize};
  file_spec.shard = spec.shard;  // a version's file holds the whole table, as the first one
  ASSIGN_OR_RETURN(std::unique_ptr<TableSource> source, TableSource::Open(file_spec));
  source->set_version(spec.path, version);
  return source;
}

absl::StatusOr<std::unique_ptr<TableSource>> OpenNewestVersion(const TableSpec& spec,
                                                               std::vector<std::string>* skipped) {
  ASSIGN_OR_RETURN(const std::vector<int64_t> versions, ListVersions(spec.path));
  for (int64_t v : versions) {
    absl::StatusOr<std::unique_ptr<TableSource>> source = OpenVersion(spec, v);
    if (source.ok()) {
      return source;
    }
    skipped->push_back(absl::StrCat("table '", spec.name, "': version ", v,
                                    " refused: ", source.status().message()));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("table '", spec.name, "': no version in ", spec.path, " can be served",
                   versions.empty() ? " (it holds no numbered version directory, e.g. 1/table.npy)"
                                    : absl::StrCat(": ", absl::StrJoin(*skipped, "; "))));
}

absl::StatusOr<VersionFile> WriteVersion(
    const std::string& dir, const std::string& tensor, int64_t rows, int64_t dim, DataType dtype,
    int64_t sequence,
    absl::FunctionRef<absl::Status(size_t offset, absl::Span<std::byte> out)> read) {
  ASSIGN_OR_RETURN(const std::vector<int64_t> versions, ListVersions(dir));
  VersionFile out;
  out.version = versions.empty() ? 1 : versions.front() + 1;
  const std::string tmp = absl::StrCat(dir, "/.tmp-", out.version, "-", getpid());
  const std::string final_dir = absl::StrCat(dir, "/", out.version);
  const std::string file_name = absl::StrCat(tensor, ".safetensors");
  if (mkdir(tmp.c_str(), 0755) != 0) {
    return Errno("mkdir", tmp);
  }
  const std::string tmp_file = absl::StrCat(tmp, "/", file_name);
  auto write = [&]() -> absl::Status {
    size_t data_bytes = 0;
    if (!TableBytes(rows, dim, dtype, &data_bytes)) {
      return absl::InternalError("table size overflows");
    }
    // A quantized table is a U8 tensor of whole rows, its layout and dim in the metadata.
    const std::string quantized =
        IsQuantized(dtype) ? absl::StrCat(",\"", kLayoutMetadataKey, "\":\"", DataTypeName(dtype),
                                          "\",\"", kDimMetadataKey, "\":\"", dim, "\"")
                           : "";
    const int64_t columns = IsQuantized(dtype) ? static_cast<int64_t>(RowBytes(dtype, dim)) : dim;
    std::string header = absl::StrCat(
        "{\"__metadata__\":{\"", kSequenceMetadataKey, "\":\"", sequence, "\"", quantized, "},\"",
        JsonEscape(tensor), "\":{\"dtype\":\"", SafetensorsDtype(dtype), "\",\"shape\":[", rows,
        ",", columns, "],\"data_offsets\":[0,", data_bytes, "]}}");
    header.append((8 - header.size() % 8) % 8, ' ');  // the data starts 8-byte aligned
    const int fd = open(tmp_file.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) {
      return Errno("create", tmp_file);
    }
    absl::Status s = [&]() -> absl::Status {
      std::byte len[8];
      for (int i = 0; i < 8; ++i) {
        len[i] = static_cast<std::byte>((header.size() >> (8 * i)) & 0xff);
      }
      RETURN_IF_ERROR(WriteAll(fd, len, 8, tmp_file));
      RETURN_IF_ERROR(
          WriteAll(fd, reinterpret_cast<const std::byte*>(header.data()), header.size(), tmp_file));
      constexpr size_t kChunk = size_t{64} << 20;
      std::vector<std::byte> chunk(std::min(kChunk, std::max<size_t>(data_bytes, 1)));
      for (size_t offset = 0; offset < data_bytes;) {
        const size_t n = std::min(chunk.size(), data_bytes - offset);
        RETURN_IF_ERROR(read(offset, absl::MakeSpan(chunk.data(), n)));
        RETURN_IF_ERROR(WriteAll(fd, chunk.data(), n, tmp_file));
        offset += n;
      }
      if (fsync(fd) != 0) {
        return Errno("fsync", tmp_file);
      }
      out.bytes = 8 + header.size() + data_bytes;
      return absl::OkStatus();
    }();
    close(fd);
    RETURN_IF_ERROR(s);
    RETURN_IF_ERROR(SyncPath(tmp));
    if (rename(tmp.c_str(), final_dir.c_str()) != 0) {
      return Errno(absl::StrCat("rename ", tmp, " to"), final_dir);
    }
    return SyncPath(dir);
  };
  if (absl::Status s = write(); !s.ok()) {
    RemoveTree(tmp);
    return s;
  }
  out.path = absl::StrCat(final_dir, "/", file_name);
  return out;
}

}  // namespace emb::service
