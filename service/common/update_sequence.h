// The range of a table's update sequence: UpdateRowsRequest.sequence, and the last applied one a
// saved version carries in its metadata (emb_sequence). Sequences lie below 2^62: a publisher that
// numbers its messages by nanoseconds since 1970 fits until 2116, and a table's sequence stays a
// quarter of the int64 range away from its end, so "the table's sequence + 1" never overflows
// (a table at sequence 2^63-1 could take no later message).
// Header-only constants.
#ifndef EMB_SERVICE_COMMON_UPDATE_SEQUENCE_H_
#define EMB_SERVICE_COMMON_UPDATE_SEQUENCE_H_

#include <cstdint>

namespace emb::service {

// Every sequence an update or a version carries is below this: 2^62 = 4611686018427387904.
inline constexpr int64_t kSequenceLimit = int64_t{1} << 62;

}  // namespace emb::service

#endif  // EMB_SERVICE_COMMON_UPDATE_SEQUENCE_H_
