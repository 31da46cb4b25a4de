#include "service/tables/table_source.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "kernels/quantize_rows.h"
#include "service/common/regular_file.h"
#include "service/common/status_macros.h"
#include "service/tables/table_layout.h"

namespace emb::service {
namespace {

absl::Status PreadAll(int fd, size_t offset, absl::Span<std::byte> dst, absl::string_view path) {
  size_t done = 0;
  while (done < dst.size()) {
    const ssize_t n =
        pread(fd, dst.data() + done, dst.size() - done, static_cast<off_t>(offset + done));
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

}  // namespace

absl::StatusOr<std::unique_ptr<TableSource>> TableSource::Open(const TableSpec& spec) {
  const std::string& path = spec.path;
  struct stat st;
  ASSIGN_OR_RETURN(const int fd, OpenRegularFile(path, &st));  // a FIFO or device: at once
  auto source = std::unique_ptr<TableSource>(new TableSource());
  source->fd_ = fd;  // closed by the destructor from here on
  ASSIGN_OR_RETURN(const TableLayout layout,
                   ParseLayout(spec, static_cast<size_t>(st.st_size),
                               [fd, &path](size_t offset, absl::Span<std::byte> dst) {
                                 return PreadAll(fd, offset, dst, path);
                               }));
  source->name_ = spec.name;
  source->origin_ = spec.tensor.empty() ? path : absl::StrCat(path, "#", spec.tensor);
  source->ids_ = RowRange::Whole(layout.rows);
  source->dim_ = layout.dim;
  source->dtype_ = layout.dtype;
  source->stored_dtype_ = layout.dtype;
  if (spec.quantize.has_value() && *spec.quantize != layout.dtype) {
    if (IsQuantized(layout.dtype)) {
      return absl::InvalidArgumentError(
          absl::StrCat(source->origin_, ": the table is stored as ", DataTypeName(layout.dtype),
                       " already; it cannot be quantized again to ", DataTypeName(*spec.quantize)));
    }
    source->dtype_ = *spec.quantize;
  }
  source->data_offset_ = layout.data_offset;
  source->sequence_ = layout.sequence;
  source->tensor_ = spec.tensor;
  RETURN_IF_ERROR(source->SetShard(spec.shard));
  return source;
}

std::unique_ptr<TableSource> TableSource::Demo(std::string name, int64_t rows, int64_t dim,
                                               uint64_t seed) {
  auto source = std::unique_ptr<TableSource>(new TableSource());
  source->name_ = std::move(name);
  source->origin_ = absl::StrCat("demo(seed=", seed, ")");
  source->ids_ = RowRange::Whole(rows);
  source->dim_ = dim;
  source->dtype_ = DataType::kFloat32;
  source->demo_seed_ = seed;
  return source;
}

absl::StatusOr<std::unique_ptr<TableSource>> TableSource::DemoShard(std::string name, int64_t rows,
                                                                    int64_t dim, uint64_t seed,
                                                                    ShardSpec shard) {
  std::unique_ptr<TableSource> source = Demo(std::move(name), rows, dim, seed);
  RETURN_IF_ERROR(source->SetShard(shard));
  return source;
}

absl::Status TableSource::SetShard(std::optional<ShardSpec> shard) {
  shard_ = shard;
  if (!shard.has_value()) {
    return absl::OkStatus();
  }
  const RowRange whole = ids_;
  ids_ = shard->Of(whole.whole());
  if (ids_.count() == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("shard ", shard->index, "/", shard->count, " of table '", name_, "' (",
                     origin_, ") holds no rows: ", whole.whole(), " rows split into ", shard->count,
                     " blocks of ", whole.BlockRows(shard->count), " leave none for it"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<TableSource>> TableSource::Slice(int index, int count) const {
  if (count < 1 || index < 0 || index >= count || ids_.Block(index, count).count() == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("table '", name_, "' (", rows(), " rows) cannot be split into ", count,
                     " blocks: block ", index, " would hold no rows"));
  }
  auto slice = std::unique_ptr<TableSource>(new TableSource());
  if (fd_ >= 0) {
    slice->fd_ = fcntl(fd_, F_DUPFD_CLOEXEC, 0);
    if (slice->fd_ < 0) {
      return absl::InternalError(
          absl::StrCat(origin_, ": cannot open the file again: ", std::strerror(errno)));
    }
  }
  slice->name_ = name_;
  slice->origin_ = origin_;
  slice->ids_ = ids_.Block(index, count);
  slice->shard_ = shard_;
  slice->dim_ = dim_;
  slice->dtype_ = dtype_;
  slice->stored_dtype_ = stored_dtype_;
  slice->data_offset_ = data_offset_;
  slice->demo_seed_ = demo_seed_;
  slice->sequence_ = sequence_;
  slice->versions_dir_ = versions_dir_;
  slice->tensor_ = tensor_;
  slice->version_ = version_;
  return slice;
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
  if (dtype_ == stored_dtype_) {
    return ReadStored(offset, dst);
  }
  // Quantized as they load: read the stored rows that the range touches, quantize them, and copy
  // the range's part.
  const size_t row = row_bytes();
  const size_t stored_row = RowBytes(stored_dtype_, dim_);
  const size_t first = offset / row;
  const size_t last = (offset + dst.size() + row - 1) / row;  // one past
  std::vector<std::byte> stored((last - first) * stored_row);
  std::vector<std::byte> quantized((last - first) * row);
  RETURN_IF_ERROR(ReadStored(first * stored_row, absl::MakeSpan(stored)));
  if (absl::Status s =
          EncodeRows(stored.data(), stored_dtype_, static_cast<int64_t>(last - first), dim_, dtype_,
                     quantized.data(), ids_.first() + static_cast<int64_t>(first));
      !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(origin_, ": cannot be quantized to ",
                                                   DataTypeName(dtype_), ": ", s.message()));
  }
  std::memcpy(dst.data(), quantized.data() + (offset - first * row), dst.size());
  return absl::OkStatus();
}

absl::Status TableSource::ReadStored(size_t offset, absl::Span<std::byte> dst) const {
  offset +=
      static_cast<size_t>(ids_.first()) * RowBytes(stored_dtype_, dim_);  // in the whole table
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

void TableSource::AdviseSequential() const {
  if (fd_ >= 0) {
    const size_t stored_row = RowBytes(stored_dtype_, dim_);
    (void)posix_fadvise(
        fd_, static_cast<off_t>(data_offset_ + static_cast<size_t>(ids_.first()) * stored_row),
        static_cast<off_t>(static_cast<size_t>(rows()) * stored_row), POSIX_FADV_SEQUENTIAL);
  }
}

absl::StatusOr<std::unique_ptr<HugePageRows>> TableSource::ReadAll() const {
  ASSIGN_OR_RETURN(std::unique_ptr<HugePageRows> rows, HugePageRows::Allocate(bytes(), origin_));
  if (fd_ < 0) {
    RETURN_IF_ERROR(Read(0, absl::MakeSpan(rows->mutable_data(), bytes())));
    return rows;
  }
  // Read the file once, sequentially, into the rows. With pread (not a mapping of the file), a
  // file truncated while it loads is an error naming the file and offset, not a SIGBUS.
  AdviseSequential();
  RETURN_IF_ERROR(Read(0, absl::MakeSpan(rows->mutable_data(), bytes())));
  return rows;
}

}  // namespace emb::service
