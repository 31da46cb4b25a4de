// Regular files only: how the server opens what its flags name (table files, TLS files, flag
// files). A FIFO would block open() or read() for ever, a device such as /dev/zero never ends, and
// a directory reads as nothing; each is refused at once with a line that says so. Files read whole
// have a size bound. Thread-compatible functions; no state.
#ifndef EMB_SERVICE_COMMON_REGULAR_FILE_H_
#define EMB_SERVICE_COMMON_REGULAR_FILE_H_

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

namespace emb::service {

// What `mode` is, for messages: "a directory", "a FIFO", ...
inline const char* FileKind(mode_t mode) {
  if (S_ISDIR(mode)) {
    return "a directory";
  }
  if (S_ISFIFO(mode)) {
    return "a FIFO";
  }
  if (S_ISCHR(mode)) {
    return "a character device";
  }
  if (S_ISBLK(mode)) {
    return "a block device";
  }
  if (S_ISSOCK(mode)) {
    return "a socket";
  }
  return "not a regular file";
}

// Opens `path` read-only (close-on-exec) if it is a regular file, and fills *st. The open does not
// block on a FIFO (O_NONBLOCK, cleared once fstat says the file is regular). The caller owns the
// descriptor. NOT_FOUND when it does not exist; INVALID_ARGUMENT for anything else, naming `path`
// and what it is.
inline absl::StatusOr<int> OpenRegularFile(const std::string& path, struct stat* st) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    const int err = errno;
    const std::string message = absl::StrCat(path, ": cannot open: ", std::strerror(err));
    return err == ENOENT ? absl::NotFoundError(message) : absl::InvalidArgumentError(message);
  }
  if (fstat(fd, st) != 0) {
    const int err = errno;
    close(fd);
    return absl::InvalidArgumentError(absl::StrCat(path, ": cannot stat: ", std::strerror(err)));
  }
  if (!S_ISREG(st->st_mode)) {
    close(fd);
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": ", FileKind(st->st_mode), ", not a regular file"));
  }
  (void)fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return fd;
}

// The whole of the regular file `path`, of at most `max_bytes` bytes; errors as OpenRegularFile,
// and INVALID_ARGUMENT for a larger file or a failed read.
inline absl::StatusOr<std::string> ReadRegularFile(const std::string& path, size_t max_bytes) {
  struct stat st;
  absl::StatusOr<int> fd = OpenRegularFile(path, &st);
  if (!fd.ok()) {
    return fd.status();
  }
  if (static_cast<size_t>(st.st_size) > max_bytes) {
    close(*fd);
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", st.st_size, " bytes, over the ",
                                                   max_bytes, " bytes such a file may have"));
  }
  std::string text(static_cast<size_t>(st.st_size), '\0');
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = read(*fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      const int err = errno;
      close(*fd);
      return absl::InvalidArgumentError(absl::StrCat(
          path, ": cannot read: ", n == 0 ? "the file shrank while read" : std::strerror(err)));
    }
    done += static_cast<size_t>(n);
  }
  close(*fd);
  return text;
}

}  // namespace emb::service

#endif  // EMB_SERVICE_COMMON_REGULAR_FILE_H_
