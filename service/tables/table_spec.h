// The --table flag: which file (and tensor) a table comes from.
#ifndef EMB_SERVICE_TABLES_TABLE_SPEC_H_
#define EMB_SERVICE_TABLES_TABLE_SPEC_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "kernels/data_type.h"
#include "service/ids/row_range.h"

namespace emb::service {

// A row range of a table: shard `index` of `count` holds the contiguous block of
// ceil(rows / count) rows that starts at index * ceil(rows / count) (the last block may be
// shorter), as TorchRec's row-wise sharding splits a table. Ids stay global: the shard answers ids
// in its block only.
struct ShardSpec {
  int index = 0;
  int count = 1;

  // This shard's block of a table of `whole_rows` rows (empty for a shard past the end: more
  // shards than the table has rows).
  RowRange Of(int64_t whole_rows) const { return RowRange::Whole(whole_rows).Block(index, count); }
  bool operator==(const ShardSpec& o) const { return index == o.index && count == o.count; }
};

// The most shards a table may be split into.
inline constexpr int kMaxShards = 4096;

// Parses "K/N": 0 <= K < N <= kMaxShards; else INVALID_ARGUMENT naming `what` (the flag or
// option) and the problem.
absl::StatusOr<ShardSpec> ParseShardSpec(absl::string_view text, absl::string_view what);

// One --table flag: NAME=PATH[#TENSOR][,OPTION=VALUE]..., where #TENSOR names a .safetensors
// file's tensor, and the options (kTableSpecUsage) say how the table is served.
struct TableSpec {
  std::string name;
  std::string path;
  std::string tensor;  // safetensors only; empty: the file's only tensor
  // kInt8Rowwise or kInt4Rowwise: the rows are quantized at load; nullopt: served as stored.
  std::optional<DataType> quantize;
  // GPU: the device memory this table may take (its rows, or its host tier's cache, and its batch
  // buffers), within what --gpu_memory_budget leaves; 0: no budget of its own.
  size_t gpu_budget_bytes = 0;
  // GPU, host tier: a 1-D .npy of int64 (or int32) row ids, hottest first, put into the cache at
  // start-up (ReadHotIds); empty: none.
  std::string hot_ids_path = {};
  // The rows this server holds; nullopt: all of them (or --shard's, where that is given).
  std::optional<ShardSpec> shard = std::nullopt;
  // "replicas" or "rows": how the table is laid out over several devices (--device lists them);
  // empty: --placement.
  std::string placement = "";
  // The devices this table is on, as --device takes them ("cuda:1", "cuda:0,cuda:1", "all"; the
  // option writes '+' for ','); empty: --device's.
  std::string devices = "";
};

// The flag's form, for messages and --help.
inline constexpr char kTableSpecUsage[] =
    "NAME=PATH[#TENSOR][,quantize=int8|int4][,gpu_budget=SIZE][,hot_ids=PATH][,shard=K/N]"
    "[,placement=replicas|rows][,devices=DEVICE+DEVICE...]";

// The longest table name, in bytes.
inline constexpr size_t kMaxTableNameBytes = 256;

// OK for a name of 1 to kMaxTableNameBytes bytes of printable UTF-8 (no control characters), which
// ListTables (a proto string), the logs and Prometheus label values can carry; else
// INVALID_ARGUMENT, naming the first bad byte.
absl::Status CheckTableName(absl::string_view name);

// Parses "NAME=PATH[#TENSOR][,OPTION=VALUE]...". The options, in any order, each at most once:
//   quantize=int8|int4  the rows quantized row-wise as they load;
//   gpu_budget=SIZE     GPU memory the table may take, > 0: bytes, or with a unit K, M, G or T
//                       (KiB ... TiB; ParseByteSize);
//   hot_ids=PATH        the rows to put into a host tier's cache first;
//   shard=K/N           only shard K of N of the rows (ShardSpec; ParseShardSpec);
//   placement=replicas|rows  over several devices: the whole table on each, or its rows split
//                       over them (MultiDeviceStore);
//   devices=D+D...      the table's own devices, as --device takes them with '+' for ','.
// The options start at the first ",quantize=", ",gpu_budget=", ",hot_ids=" or ",shard="; each
// value runs to the next of them. So PATH (and hot_ids' PATH) may hold commas, and a comma followed
// by anything else is part of the path, but neither may hold one of those four. INVALID_ARGUMENT,
// naming the flag and the problem, when the name or path is missing, the name fails CheckTableName,
// an option is given twice or has an empty or bad value.
absl::StatusOr<TableSpec> ParseTableSpec(absl::string_view flag);

}  // namespace emb::service

#endif  // EMB_SERVICE_TABLES_TABLE_SPEC_H_
