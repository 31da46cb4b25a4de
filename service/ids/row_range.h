// A table's id space: which ids a store answers, and which of its own rows each one is.
//
// Callers name rows by global ids, 0..whole-1 of the whole table. A store may hold only part of
// them: a shard (--shard, a table's shard= option) holds one block of the table, and a table split
// by rows over several devices gives each device one block of what the server holds. A store holds
// its block from its own row 0. RowRange is that fact, decided once when the table is opened
// (TableInfo::ids), and the one place where a global id becomes a local row (ToLocal): the
// request checks ask Contains, the batcher and the table writer convert each batch's and each
// update's ids, and the devices of one table route each id to the block that holds it.
#ifndef EMB_SERVICE_IDS_ROW_RANGE_H_
#define EMB_SERVICE_IDS_ROW_RANGE_H_

#include <algorithm>
#include <cstdint>
#include <vector>

#include "absl/types/span.h"

namespace emb::service {

class RowRange {
 public:
  RowRange() = default;
  // Rows [first, first + count) of a table of `whole` rows.
  RowRange(int64_t first, int64_t count, int64_t whole)
      : first_(first), count_(count), whole_(whole) {}
  // A whole table of `rows` rows.
  static RowRange Whole(int64_t rows) { return RowRange(0, rows, rows); }

  int64_t first() const { return first_; }
  int64_t count() const { return count_; }
  int64_t last() const { return first_ + count_ - 1; }
  int64_t whole() const { return whole_; }

  bool Contains(int64_t id) const { return id >= first_ && id - first_ < count_; }
  // The store's own row for global id `id` (one that Contains).
  int64_t ToLocal(int64_t id) const { return id - first_; }
  // The same for every id, in place.
  void ToLocal(absl::Span<int64_t> ids) const {
    if (first_ != 0) {
      for (int64_t& id : ids) {
        id -= first_;
      }
    }
  }
  // The same into a new vector, or nothing when the ids are the rows already: `ids` stays valid.
  std::vector<int64_t> ToLocalCopy(absl::Span<const int64_t> ids) const {
    std::vector<int64_t> local;
    if (first_ != 0) {
      local.reserve(ids.size());
      for (const int64_t id : ids) {
        local.push_back(id - first_);
      }
    }
    return local;
  }

  // The rows of those of `ids` that this range holds, in their order; the others left out.
  std::vector<int64_t> LocalRowsOf(absl::Span<const int64_t> ids) const {
    std::vector<int64_t> local;
    for (const int64_t id : ids) {
      if (Contains(id)) {
        local.push_back(ToLocal(id));
      }
    }
    return local;
  }

  // Rows in each of `n` blocks of this range: all blocks but the last hold this many.
  int64_t BlockRows(int n) const { return (count_ + n - 1) / n; }
  // Block `k` of `n` (its ids still the table's); empty when the blocks before it hold every row.
  RowRange Block(int k, int n) const {
    const int64_t begin = std::min(count_, static_cast<int64_t>(k) * BlockRows(n));
    const int64_t end = std::min(count_, begin + BlockRows(n));
    return RowRange(first_ + begin, end - begin, whole_);
  }
  // Which of the blocks of a split holds an id, at one division an id.
  class Blocks {
   public:
    Blocks(int64_t first, int64_t block_rows) : first_(first), block_rows_(block_rows) {}
    // The block that holds global id `id` (one the range Contains).
    int Of(int64_t id) const { return static_cast<int>((id - first_) / block_rows_); }

   private:
    int64_t first_;
    int64_t block_rows_;
  };
  // The split into `n` blocks (Block(k, n) for each k).
  Blocks SplitInto(int n) const { return Blocks(first_, BlockRows(n)); }

  bool operator==(const RowRange& o) const {
    return first_ == o.first_ && count_ == o.count_ && whole_ == o.whole_;
  }

 private:
  int64_t first_ = 0;
  int64_t count_ = 0;
  int64_t whole_ = 0;
};

}  // namespace emb::service

#endif  // EMB_SERVICE_IDS_ROW_RANGE_H_
