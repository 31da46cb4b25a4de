// The values a store and its callers exchange: what a store holds (TableInfo), a batch and where
// its rows go (LookUpBatch, AnswerSpan, BatchBags), how long its stages took (StageTimes), and the
// cache's figures. The interface itself is embedding_store.h.
#ifndef EMB_SERVICE_STORE_STORE_TYPES_H_
#define EMB_SERVICE_STORE_STORE_TYPES_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "kernels/data_type.h"
#include "service/ids/row_range.h"
#include "service/tables/table_source.h"

namespace emb::service {

// How long the stages of one batch took, in seconds; 0 where the device has no such stage.
struct StageTimes {
  double copy_in = 0;
  double gather = 0;
  double copy_out = 0;
  // The host's copies of rows from the store's own buffer into the callers' buffers; 0 where the
  // gather or the copy engines wrote every row straight into them.
  double host_copy = 0;
};

// How a table on several devices is laid out (MultiDeviceStore).
enum class Placement {
  kOneDevice,   // the table on one device
  kReplicated,  // the whole table on every device; each batch served by one of them
  kRowSharded,  // the rows split into one block a device; each batch's ids split by owner
};
// "one device", "replicas", "rows": as --placement and the logs name them.
const char* PlacementName(Placement placement);

// One device's part of a table on several devices.
struct DevicePart {
  std::string device;       // "cpu" or "cuda:N"
  RowRange ids = {};        // the part's rows, by their global ids
  size_t device_bytes = 0;  // GPU memory the part took (0 on the CPU)
  bool host_tier = false;   // the part's rows in host memory with a GPU cache
};

// What a store holds: the table and where it lives.
struct TableInfo {
  std::string name;
  int64_t rows = 0;
  int64_t dim = 0;
  DataType dtype = DataType::kFloat32;
  std::string device;  // "cpu" or "cuda:N"
  // On a GPU: the rows are in host memory, with a cache of cache_rows of them on the device
  // (a table larger than the GPU memory it may use); false: all rows on the device.
  bool host_tier = false;
  int64_t cache_rows = 0;
  // GPU memory the store took (its rows or its cache and slots, and its batch buffers); 0 on the
  // CPU.
  size_t device_bytes = 0;
  // The ids the store answers, and their rows in it (ids.count() is rows): the whole table's, or
  // a shard's (--shard, or the table's shard= option; shard is nullopt for a whole table).
  RowRange ids = {};
  std::optional<ShardSpec> shard = std::nullopt;
  // A table on several devices: how, and each device's part (device above lists them all, and
  // device_bytes, host_tier and cache_rows are their totals); empty on one device.
  Placement placement = Placement::kOneDevice;
  std::vector<DevicePart> parts = {};
  // Bytes of the table's rows.
  size_t bytes() const { return static_cast<size_t>(rows) * RowBytes(dtype, dim); }

  // A store's info before placement: the source's name, rows, shape and shard, on `device`.
  static TableInfo Of(const TableSource& source, std::string device) {
    TableInfo info{source.name(), source.rows(), source.dim(), source.dtype(), std::move(device)};
    info.ids = source.ids();
    info.shard = source.shard();
    return info;
  }
};

// What a host tier's GPU cache holds and has served; counts since start-up.
struct CacheStats {
  int64_t capacity_rows = 0;
  int64_t cached_rows = 0;
  size_t row_bytes = 0;
  int64_t lookups = 0;  // rows looked up in batches that have ended
  int64_t misses = 0;   // rows read from host memory, of batches ended or running
};

// One caller's share of a batch's answer: whole rows of the answer type, in id order. `device` is
// the same memory as the store's device sees it (pinned memory mapped into its address space, from
// the device's AnswerBufferPool), so that the device writes the rows there itself; nullptr where
// the device cannot see it (ordinary host memory). A span in device memory only (OnDevice: a row
// split's staging rows on a GPU, MultiDeviceStore) has no host address; `host` then gives only its
// size, and only a GPU store writes it (a copy from any device: the addresses are unified).
struct AnswerSpan {
  absl::Span<std::byte> host;
  std::byte* device = nullptr;

  static AnswerSpan OnDevice(std::byte* device, size_t bytes) {
    return AnswerSpan{absl::Span<std::byte>(nullptr, bytes), device};
  }
  bool device_only() const { return host.data() == nullptr && device != nullptr; }
};

// The pooled part of a batch: bag b is ids[offsets[b] .. offsets[b + 1]) of the batch's ids, and
// the bags come after the ids answered one row each (offsets[0] of them), so offsets.back() is
// the batch's last id. A bag's row is the sum of its rows (each times its weight, where `weights`
// is given), times its scale (where `scales` is given: a mean's 1 / length), accumulated in
// float32 and rounded once to the answer type (kernels::CpuPooledGather).
struct BatchBags {
  absl::Span<const int64_t> offsets;  // bags + 1; empty: nothing is pooled
  absl::Span<const float> weights;    // empty, or one per id of the batch (the pooled ones read)
  absl::Span<const float> scales;     // empty, or one per bag
  size_t count() const { return offsets.empty() ? 0 : offsets.size() - 1; }
};

// One batch handed to a store.
struct LookUpBatch {
  absl::Span<const int64_t> ids;
  DataType out_type = DataType::kFloat32;
  // Where the answer's rows go, one span per caller in order: first a row per id for the ids
  // before the bags, then a row per bag.
  absl::Span<const AnswerSpan> outs;
  BatchBags bags;

  // The ids answered one row each: all of them when nothing is pooled.
  size_t plain_ids() const {
    return bags.offsets.empty() ? ids.size() : static_cast<size_t>(bags.offsets.front());
  }
  size_t answer_rows() const { return plain_ids() + bags.count(); }
};

// OK if `outs` are whole rows of `row_bytes` that together hold `ids` rows (a batch's answer
// rows), and none holds both rows of single ids and pooled rows (the first `plain` rows); else
// INTERNAL, saying which span is off.
inline absl::Status CheckRowsOut(size_t ids, size_t row_bytes, absl::Span<const AnswerSpan> outs,
                                 size_t plain = 0) {
  size_t rows = 0;
  for (size_t i = 0; i < outs.size(); ++i) {
    const size_t bytes = outs[i].host.size();
    if (row_bytes == 0 || bytes % row_bytes != 0) {
      return absl::InternalError(absl::StrCat("answer span ", i, " holds ", bytes,
                                              " bytes, not whole rows of ", row_bytes));
    }
    const size_t first = rows;
    rows += bytes / row_bytes;
    if (first < plain && rows > plain) {
      return absl::InternalError(absl::StrCat("answer span ", i, " holds rows ", first, " to ",
                                              rows, ", across the first pooled row ", plain));
    }
  }
  if (rows != ids) {
    return absl::InternalError(
        absl::StrCat("the answer spans hold ", rows, " rows for ", ids, " ids"));
  }
  return absl::OkStatus();
}

}  // namespace emb::service

#endif  // EMB_SERVICE_STORE_STORE_TYPES_H_
