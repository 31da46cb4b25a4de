#include "service/store/embedding_store.h"

#include "absl/container/flat_hash_map.h"

namespace emb::service {

std::vector<size_t> LastOccurrences(absl::Span<const int64_t> ids) {
  absl::flat_hash_map<int64_t, size_t> last;
  last.reserve(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    last[ids[i]] = i;
  }
  std::vector<size_t> keep;
  keep.reserve(last.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    if (last[ids[i]] == i) {
      keep.push_back(i);
    }
  }
  return keep;
}

}  // namespace emb::service
