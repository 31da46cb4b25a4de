#include "service/tables/table_versions.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <limits>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
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

// Closes a file descriptor when it goes out of scope (which also releases its flock).
class ScopedFd {
 public:
  explicit ScopedFd(int fd) : fd_(fd) {}
  ~ScopedFd() {
    if (fd_ >= 0) {
      close(fd_);
    }
  }
  ScopedFd(const ScopedFd&) = delete;
  ScopedFd& operator=(const ScopedFd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

// 64 bits that no earlier run of any server drew: from the kernel's random source, else the time.
uint64_t TemporaryToken() {
  uint64_t token = 0;
  if (getrandom(&token, sizeof(token), 0) != static_cast<ssize_t>(sizeof(token))) {
    token = static_cast<uint64_t>(absl::GetCurrentTimeNanos());
  }
  return token;
}

constexpr char kTemporaryPrefix[] = ".tmp-";

}  // namespace

bool IsDirectory(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::optional<int64_t> ParseVersion(absl::string_view name) {
  int64_t v = 0;
  if (name.empty() || name.front() == '0' ||
      !std::all_of(name.begin(), name.end(), [](char c) { return absl::ascii_isdigit(c); }) ||
      !absl::SimpleAtoi(name, &v)) {
    return std::nullopt;  // SimpleAtoi fails past 2^63-1
  }
  return v;
}

absl::StatusOr<std::vector<int64_t>> ListVersions(const std::string& dir) {
  ASSIGN_OR_RETURN(std::vector<std::string> names, Entries(dir));
  std::vector<int64_t> versions;
  for (const std::string& n : names) {
    if (const std::optional<int64_t> v = ParseVersion(n);
        v.has_value() && IsDirectory(absl::StrCat(dir, "/", n))) {
      versions.push_back(*v);
    }
  }
  std::sort(versions.rbegin(), versions.rend());
  return versions;
}

absl::StatusOr<int64_t> NextVersion(const std::string& dir) {
  ASSIGN_OR_RETURN(std::vector<std::string> names, Entries(dir));
  int64_t newest = 0;
  for (const std::string& n : names) {
    newest = std::max(newest, ParseVersion(n).value_or(0));
  }
  if (newest == std::numeric_limits<int64_t>::max()) {
    return absl::FailedPreconditionError(absl::StrCat(
        dir, " holds an entry named ", newest,
        ", the largest version number there can be (2^63-1), so no version can follow it: save "
        "into a new version directory, its versions renumbered from 1"));
  }
  return newest + 1;
}

absl::StatusOr<StaleTemporaries> RemoveStaleTemporaries(const std::string& dir) {
  ASSIGN_OR_RETURN(std::vector<std::string> names, Entries(dir));
  StaleTemporaries out;
  for (const std::string& n : names) {
    if (!absl::StartsWith(n, kTemporaryPrefix)) {
      continue;
    }
    const std::string path = absl::StrCat(dir, "/", n);
    struct stat st;
    if (lstat(path.c_str(), &st) != 0) {
      continue;  // gone meanwhile
    }
    if (!S_ISDIR(st.st_mode)) {
      if (unlink(path.c_str()) == 0) {
        out.removed.push_back(path);
      } else {
        out.kept.push_back(absl::StrCat(path, ": cannot remove it: ", strerror(errno)));
      }
      continue;
    }
    // A save holds its temporary directory locked until it is renamed (or removed), and the lock
    // goes with its process: a directory that locks is no save's.
    const ScopedFd fd(open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (fd.get() < 0) {
      out.kept.push_back(absl::StrCat(path, ": cannot open it: ", strerror(errno)));
      continue;
    }
    if (flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
      out.kept.push_back(absl::StrCat(
          path, errno == EWOULDBLOCK ? ": a save of a running server is writing it"
                                     : absl::StrCat(": cannot lock it: ", strerror(errno))));
      continue;
    }
    RemoveTree(path);
    if (lstat(path.c_str(), &st) == 0) {
      out.kept.push_back(
          absl::StrCat(path, ": cannot remove all of it (a directory inside, or permissions)"));
    } else {
      out.removed.push_back(path);
    }
  }
  return out;
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
  VersionFile out;
  ASSIGN_OR_RETURN(out.version, NextVersion(dir));
  // PID and a random token: a server that restarts as the same PID (PID 1 in a container) never
  // meets the name of its earlier run's temporary directory.
  const std::string tmp = absl::StrFormat("%s/%s%d-%d-%016x", dir, kTemporaryPrefix, out.version,
                                          getpid(), TemporaryToken());
  const std::string final_dir = absl::StrCat(dir, "/", out.version);
  const std::string file_name = absl::StrCat(tensor, ".safetensors");
  if (mkdir(tmp.c_str(), 0755) != 0) {
    return Errno("mkdir", tmp);
  }
  const std::string tmp_file = absl::StrCat(tmp, "/", file_name);
  // Held until the write ends either way: RemoveStaleTemporaries leaves a locked directory alone.
  const ScopedFd lock(open(tmp.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  auto write = [&]() -> absl::Status {
    if (lock.get() < 0) {
      return Errno("open", tmp);
    }
    if (flock(lock.get(), LOCK_EX | LOCK_NB) != 0) {
      return Errno("lock", tmp);
    }
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
