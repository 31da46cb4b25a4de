// Where a table's rows come from at start-up: a .npy or .safetensors file, or a seeded demo table.
//
// Open() reads and checks only the header; the rows are read later by a store, all at once
// through ReadAll() (CPU) or in chunks through Read() (GPU staging, from several threads at once).
// Thread-compatible; Read() and AdviseSequential() are thread-safe (pread, posix_fadvise).
#ifndef EMB_SERVICE_TABLES_TABLE_SOURCE_H_
#define EMB_SERVICE_TABLES_TABLE_SOURCE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "kernels/data_type.h"
#include "service/ids/row_range.h"
#include "service/tables/host_rows.h"
#include "service/tables/table_layout.h"
#include "service/tables/table_spec.h"

namespace emb::service {

class TableSource {
 public:
  // Opens the file and checks its header against the file's size. Every defect (missing, empty,
  // bad magic, cut header, truncated data, rank other than 2, zero rows or dim, unsupported dtype,
  // sizes that overflow or exceed the file) is INVALID_ARGUMENT (NOT_FOUND for a missing file)
  // with one line naming the file and the defect.
  static absl::StatusOr<std::unique_ptr<TableSource>> Open(const TableSpec& spec);

  // A rows x dim float32 table of values drawn uniformly from [-1, 1), the same for a given seed.
  static std::unique_ptr<TableSource> Demo(std::string name, int64_t rows, int64_t dim,
                                           uint64_t seed);
  // Shard `shard` of that table: its rows, each the same as in the whole table. INVALID_ARGUMENT
  // for a shard with no rows.
  static absl::StatusOr<std::unique_ptr<TableSource>> DemoShard(std::string name, int64_t rows,
                                                                int64_t dim, uint64_t seed,
                                                                ShardSpec shard);

  // Block `index` of `count` of this source's rows (ids().Block): the same file (its own
  // descriptor) and shard() as this source's. A table on several devices loads one on each
  // (MultiDeviceStore). INVALID_ARGUMENT for a block with no rows; INTERNAL if the file cannot
  // be opened again.
  absl::StatusOr<std::unique_ptr<TableSource>> Slice(int index, int count) const;

  ~TableSource();
  TableSource(const TableSource&) = delete;
  TableSource& operator=(const TableSource&) = delete;

  const std::string& name() const { return name_; }
  // The rows this source reads: the whole table's, or its shard's or block's, by their global ids.
  const RowRange& ids() const { return ids_; }
  int64_t rows() const { return ids_.count(); }
  // The shard the spec asked for; nullopt: the whole table.
  const std::optional<ShardSpec>& shard() const { return shard_; }
  int64_t dim() const { return dim_; }
  // The type the rows are served in: the file's, or the quantized type the spec asked for.
  DataType dtype() const { return dtype_; }
  // The file's own type (dtype() unless the rows are quantized as they load).
  DataType stored_dtype() const { return stored_dtype_; }
  size_t row_bytes() const { return RowBytes(dtype_, dim_); }
  size_t bytes() const { return static_cast<size_t>(rows()) * row_bytes(); }
  // The file (with #tensor) or "demo(seed=N)", for logs.
  const std::string& origin() const { return origin_; }
  // The last update sequence applied to the rows (a saved version's metadata), else 0.
  int64_t sequence() const { return sequence_; }
  // For a table from a version directory: the directory and the version's number; else empty
  // and 0 (OpenVersions in table_versions.h sets them).
  const std::string& versions_dir() const { return versions_dir_; }
  int64_t version() const { return version_; }
  // The tensor the spec named (a .safetensors file's), or empty.
  const std::string& tensor() const { return tensor_; }
  void set_version(std::string dir, int64_t version) {
    versions_dir_ = std::move(dir);
    version_ = version;
  }

  // Copies data bytes [offset, offset + dst.size()) of the rows as served (of this source's rows:
  // offset 0 is ids().first()'s first byte) (quantized as they are
  // read, where the spec asks) into dst. INTERNAL on a read error; INVALID_ARGUMENT (naming the
  // file and row) for a row that cannot be quantized.
  absl::Status Read(size_t offset, absl::Span<std::byte> dst) const;

  // Tells the kernel that the rows will be read once, front to back (more readahead). A hint:
  // nothing for a demo table, and errors are ignored.
  void AdviseSequential() const;

  // All rows in host memory backed by huge pages where the kernel allows (random row reads then
  // skip most TLB misses): the file is memory-mapped and read once; a demo table is generated.
  // RESOURCE_EXHAUSTED when the memory cannot be had.
  absl::StatusOr<std::unique_ptr<HugePageRows>> ReadAll() const;

 private:
  TableSource() = default;
  // Read() of the stored rows, unconverted.
  absl::Status ReadStored(size_t offset, absl::Span<std::byte> dst) const;
  // Keeps only `shard`'s rows (none: all); INVALID_ARGUMENT for a shard with no rows.
  absl::Status SetShard(std::optional<ShardSpec> shard);

  std::string name_;
  std::string origin_;
  RowRange ids_;
  std::optional<ShardSpec> shard_;
  int64_t dim_ = 0;
  DataType dtype_ = DataType::kFloat32;
  DataType stored_dtype_ = DataType::kFloat32;
  int fd_ = -1;             // files only
  size_t data_offset_ = 0;  // files only: where the rows start
  uint64_t demo_seed_ = 0;  // demo only
  int64_t sequence_ = 0;
  std::string versions_dir_;
  std::string tensor_;
  int64_t version_ = 0;
};

}  // namespace emb::service

#endif  // EMB_SERVICE_TABLES_TABLE_SOURCE_H_
