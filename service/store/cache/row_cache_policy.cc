#include "service/store/cache/row_cache_policy.h"

#include <algorithm>
#include <limits>

namespace emb::service {
namespace {

// Candidates kept between plans, at most: a stream of cold ids cannot grow the set without bound.
constexpr size_t kMaxCandidates = size_t{1} << 20;

}  // namespace

RowCachePolicy::RowCachePolicy(const Options& options)
    : capacity_(std::min(options.capacity, options.rows)),
      window_(options.window > 0 ? options.window
                                 : std::max<int64_t>(32 * capacity_, int64_t{1} << 22)),
      victims_sampled_(std::max(1, options.victims_sampled)),
      counts_(static_cast<size_t>(options.rows), 0),
      slot_of_(static_cast<size_t>(options.rows), -1),
      id_of_(static_cast<size_t>(capacity_), -1),
      changed_(static_cast<size_t>(capacity_), 0),
      rng_(options.seed) {
  Clear();
}

void RowCachePolicy::Clear() {
  std::fill(slot_of_.begin(), slot_of_.end(), -1);
  std::fill(id_of_.begin(), id_of_.end(), -1);
  free_slots_.clear();
  // Taken from the back: slot 0 first.
  for (int64_t s = capacity_ - 1; s >= 0; --s) {
    free_slots_.push_back(static_cast<int32_t>(s));
  }
  candidates_.clear();
}

void RowCachePolicy::Record(absl::Span<const int64_t> ids) {
  for (const int64_t id : ids) {
    uint16_t& c = counts_[static_cast<size_t>(id)];
    if (c != std::numeric_limits<uint16_t>::max()) {
      ++c;
    }
    if (slot_of_[static_cast<size_t>(id)] < 0 && candidates_.size() < kMaxCandidates) {
      candidates_.insert(id);
    }
    if (++recorded_ >= window_) {
      Age();
    }
  }
}

void RowCachePolicy::Age() {
  for (uint16_t& c : counts_) {
    c >>= 1;
  }
  recorded_ = 0;
}

RowCachePolicy::Change RowCachePolicy::Admit(int64_t id, int32_t slot) {
  const int64_t evicted = id_of_[static_cast<size_t>(slot)];
  if (evicted >= 0) {
    slot_of_[static_cast<size_t>(evicted)] = -1;
  }
  id_of_[static_cast<size_t>(slot)] = id;
  slot_of_[static_cast<size_t>(id)] = slot;
  changed_[static_cast<size_t>(slot)] = plan_;
  return Change{id, slot, evicted};
}

int32_t RowCachePolicy::PickVictim() {
  std::uniform_int_distribution<int64_t> pick(0, capacity_ - 1);
  int32_t victim = -1;
  for (int k = 0; k < victims_sampled_; ++k) {
    const auto s = static_cast<int32_t>(pick(rng_));
    const int64_t id = id_of_[static_cast<size_t>(s)];
    if (id < 0 || changed_[static_cast<size_t>(s)] == plan_) {
      continue;
    }
    if (victim < 0 || counts_[static_cast<size_t>(id)] <
                          counts_[static_cast<size_t>(id_of_[static_cast<size_t>(victim)])]) {
      victim = s;
    }
  }
  return victim;
}

std::vector<RowCachePolicy::Change> RowCachePolicy::Plan(size_t max_changes) {
  std::vector<Change> changes;
  if (capacity_ == 0 || candidates_.empty() || max_changes == 0) {
    return changes;
  }
  ++plan_;
  std::vector<int64_t> order(candidates_.begin(), candidates_.end());
  // Only the hottest few times max_changes are ordered (some lose to their victims): a plan costs
  // a pass over the candidates, not a sort of them all.
  const size_t considered = std::min(order.size(), 4 * max_changes);
  std::partial_sort(order.begin(), order.begin() + static_cast<ptrdiff_t>(considered), order.end(),
                    [&](int64_t a, int64_t b) {
                      const uint16_t ca = counts_[static_cast<size_t>(a)];
                      const uint16_t cb = counts_[static_cast<size_t>(b)];
                      return ca != cb ? ca > cb : a < b;
                    });
  for (size_t next = 0; next < considered && changes.size() < max_changes; ++next) {
    const int64_t id = order[next];
    candidates_.erase(id);
    if (slot_of_[static_cast<size_t>(id)] >= 0) {
      continue;
    }
    if (!free_slots_.empty()) {
      const int32_t slot = free_slots_.back();
      free_slots_.pop_back();
      changes.push_back(Admit(id, slot));
      continue;
    }
    const int32_t victim = PickVictim();
    if (victim >= 0 && counts_[static_cast<size_t>(id)] >
                           counts_[static_cast<size_t>(id_of_[static_cast<size_t>(victim)])]) {
      changes.push_back(Admit(id, victim));
    }
  }
  return changes;
}

std::vector<RowCachePolicy::Change> RowCachePolicy::Warm(absl::Span<const int64_t> ids) {
  std::vector<Change> changes;
  ++plan_;
  for (const int64_t id : ids) {
    if (free_slots_.empty()) {
      break;
    }
    if (id < 0 || id >= static_cast<int64_t>(slot_of_.size()) ||
        slot_of_[static_cast<size_t>(id)] >= 0) {
      continue;
    }
    const int32_t slot = free_slots_.back();
    free_slots_.pop_back();
    changes.push_back(Admit(id, slot));
    // As much as a row looked up once: a scan's rows do not replace it.
    counts_[static_cast<size_t>(id)] = std::max<uint16_t>(counts_[static_cast<size_t>(id)], 1);
  }
  return changes;
}

}  // namespace emb::service
