// LookupProblem: what one lookup launch reads and writes (LaunchLookup, kernels/lookup.h): a table
// (where its rows live and their type), ids one per answer row or in bags, and the answer. Plain,
// so that the kernels' launchers (built by nvcc, without Abseil) and host code share it.
#ifndef EMB_KERNELS_LOOKUP_PROBLEM_H_
#define EMB_KERNELS_LOOKUP_PROBLEM_H_

#include <cstdint>

#include "kernels/data_type.h"

namespace emb::kernels {

// A table in two tiers: its rows in host memory that the device maps, and a cache of some of
// them in device memory. Row `id` is at cache + slots[id] * row bytes when slots[id] >= 0, else
// at LookupProblem::table + id * row bytes (the host rows).
struct CachedRows {
  const int32_t* slots = nullptr;  // one per row of the table, in device memory
  const void* cache = nullptr;
  // Where given (device memory, kMissCounters of them), the launch adds the rows it reads from
  // the host tier, spread over the counters to keep the atomics apart; their sum is the count.
  unsigned long long* misses = nullptr;
  static constexpr int kMissCounters = 32;
};

// Device pointers of one lookup; see LaunchLookup. The table's residence: in device memory, or in
// two tiers (cached.slots set); its type: a value type or quantized rows.
struct LookupProblem {
  const void* table = nullptr;
  DataType table_type = DataType::kFloat32;  // any table type
  int64_t rows = 0;
  int64_t dim = 0;
  // Set (slots not null) for a table in two tiers; `table` is then the host rows.
  CachedRows cached;
  const int64_t* ids = nullptr;
  // num_bags + 1 offsets into `ids` (bag b: ids[offsets[b] .. offsets[b + 1])), or nullptr for
  // bags of one id each (bag b is ids[b]: a gather).
  const int64_t* offsets = nullptr;
  int64_t num_bags = 0;
  // The ids of all the bags (offsets[num_bags] - offsets[0]) where the caller knows it, else 0: the
  // launcher picks how a bag's ids are loaded by their mean count.
  int64_t num_ids = 0;
  const float* weights = nullptr;          // nullptr, or one per id, by index in `ids`
  const float* scales = nullptr;           // nullptr, or one factor per bag (a mean's 1 / length)
  void* out = nullptr;                     // num_bags rows of dim elements of out_type
  DataType out_type = DataType::kFloat32;  // a value type
};

}  // namespace emb::kernels

#endif  // EMB_KERNELS_LOOKUP_PROBLEM_H_
