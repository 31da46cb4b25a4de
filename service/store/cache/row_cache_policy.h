// RowCachePolicy: which rows of a table a cache of a fixed number of rows holds, chosen by how
// often they are looked up (a frequency policy with aging and admission by comparison, after
// TinyLFU and Redis's sampled LFU).
//
// The cache's manager feeds it the ids of lookups (a sample of them) with Record, off the lookup
// path, and asks it for changes with Plan. A row is admitted while a slot is free, or when it has
// been looked up more often than the least used of a few cached rows sampled at random, which it
// replaces: a scan of cold ids, each seen once, cannot push out rows seen more often. Counts
// halve every `window` recorded ids, so that the cache follows a hot set that drifts.
//
// Memory: 6 bytes a row of the table (a 16-bit count and a 32-bit slot), 8 a slot.
// Thread-compatible.
#ifndef EMB_SERVICE_STORE_CACHE_ROW_CACHE_POLICY_H_
#define EMB_SERVICE_STORE_CACHE_ROW_CACHE_POLICY_H_

#include <cstdint>
#include <random>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/types/span.h"

namespace emb::service {

class RowCachePolicy {
 public:
  struct Options {
    int64_t rows = 0;      // of the table
    int64_t capacity = 0;  // slots of the cache, at most rows and 2^31 - 1
    // Recorded ids between two halvings of every count; 0 picks max(32 x capacity, 2^22).
    int64_t window = 0;
    // Cached rows sampled to find a victim.
    int victims_sampled = 8;
    uint64_t seed = 1;
  };
  // Row `id` moves into `slot`, replacing row `evicted` (-1 where the slot was free).
  struct Change {
    int64_t id;
    int32_t slot;
    int64_t evicted;
  };

  explicit RowCachePolicy(const Options& options);

  // Counts lookups of `ids` (each in [0, rows)); those not cached become candidates.
  void Record(absl::Span<const int64_t> ids);
  // Up to max_changes changes, the most counted candidates first; slot_of() already shows them.
  // A slot changes at most once per plan. Candidates left out of a full plan stay for the next;
  // those that lost to their victims are dropped until they are looked up again.
  std::vector<Change> Plan(size_t max_changes);
  // Admits `ids` (a list of hot rows, hottest first) into free slots, as far as they go; ids out
  // of range or cached are skipped.
  std::vector<Change> Warm(absl::Span<const int64_t> ids);
  // Forgets every cached row (the table's rows were replaced): every slot is free, the counts
  // stay.
  void Clear();

  // The row's slot, or -1 where it is not cached.
  int32_t slot_of(int64_t id) const { return slot_of_[static_cast<size_t>(id)]; }
  int64_t cached_rows() const { return capacity_ - static_cast<int64_t>(free_slots_.size()); }
  int64_t capacity() const { return capacity_; }
  uint16_t count(int64_t id) const { return counts_[static_cast<size_t>(id)]; }

 private:
  // Moves `id` into a free slot or over `victim`'s slot.
  Change Admit(int64_t id, int32_t slot);
  // A cached slot not changed in this plan with the least count of a few sampled, or -1.
  int32_t PickVictim();
  void Age();

  const int64_t capacity_;
  const int64_t window_;
  const int victims_sampled_;
  std::vector<uint16_t> counts_;   // per row
  std::vector<int32_t> slot_of_;   // per row
  std::vector<int64_t> id_of_;     // per slot; -1 free
  std::vector<uint32_t> changed_;  // per slot: the plan that last changed it
  uint32_t plan_ = 0;
  std::vector<int32_t> free_slots_;
  absl::flat_hash_set<int64_t> candidates_;
  int64_t recorded_ = 0;  // since the last halving
  std::mt19937_64 rng_;
};

}  // namespace emb::service

#endif  // EMB_SERVICE_STORE_CACHE_ROW_CACHE_POLICY_H_
