// The checks a LookUpRequest passes before it is queued (README, "Errors"): its shape, the number
// of ids and the answer's size against the server's limits, its dtype, and every id against the
// table. A pure function, so thread-safe; EmbeddingServiceImpl calls it on the gRPC thread and
// counts the rejected ids, and tests/fuzz/ calls it on its own.
#ifndef EMB_SERVICE_RPC_REQUEST_VALIDATION_H_
#define EMB_SERVICE_RPC_REQUEST_VALIDATION_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "embedding/v1/embedding_admin.pb.h"
#include "embedding/v1/embedding_service.pb.h"
#include "kernels/data_type.h"
#include "service/ids/row_range.h"

namespace emb::service {

// Why ids were turned away before a batch was formed: the `reason` label of
// embedding_rejected_ids_total (Metrics::RejectIds).
inline constexpr absl::string_view kRejectNegativeId = "negative_id";
inline constexpr absl::string_view kRejectOutOfRange = "out_of_range";
inline constexpr absl::string_view kRejectBadShape = "bad_shape";
inline constexpr absl::string_view kRejectBadDtype = "bad_dtype";
// A pooled request's bags: offsets, lengths, weights or pooling mode malformed.
inline constexpr absl::string_view kRejectBadBags = "bad_bags";
inline constexpr absl::string_view kRejectTooManyIds = "too_many_ids";
inline constexpr absl::string_view kRejectAnswerTooLarge = "answer_too_large";
inline constexpr absl::string_view kRejectQueueFull = "queue_full";
inline constexpr absl::string_view kRejectUnavailable = "unavailable";
// Refused by the bound on answers not yet sent (service/rpc/unsent_answers.h): this connection's,
// or all connections' together.
inline constexpr absl::string_view kRejectUnsentConnection = "unsent_answers_connection";
inline constexpr absl::string_view kRejectUnsentTotal = "unsent_answers_total";
// Refused because its answer would be sent after its deadline (the same file).
inline constexpr absl::string_view kRejectWouldBeLate = "would_be_late";

// What a request is checked against: the table it names.
struct RequestTable {
  absl::string_view name;  // for messages
  RowRange ids = {};       // the valid ids (TableInfo::ids)
  int64_t dim = 0;
  DataType dtype = DataType::kFloat32;  // the table's type (a quantized table answers float32)
  // Shard shard_index of shard_count; 0: the whole table.
  int shard_index = 0;
  int shard_count = 0;
};

// How a valid LookUpRequest is answered.
struct LookUpPlan {
  DataType out_type = DataType::kFloat32;  // a value type
  std::vector<int64_t> shape;              // the answer's, its last axis the table's dim
  int64_t answer_rows = 0;                 // one per id, or one per bag
  bool pooled = false;
  bool mean = false;
  // Pooled: bags + 1 offsets into the ids, from 0 to len(ids) (from the request's offsets, its
  // lengths, or its shape's last axis).
  std::vector<int64_t> offsets;
};

// How `request` is answered when it may be served from `table` within the limits. Otherwise
// INVALID_ARGUMENT (bad shape, too many ids or bags, an answer over max_response_bytes, an unknown
// or quantized answer dtype, a negative id, malformed bags: offsets that do not run from 0 to
// len(ids) or that decrease, lengths that do not sum to len(ids), weights of the wrong length or
// without POOLING_SUM or not finite (NaN, infinity), offsets or lengths or weights without pooling)
// or OUT_OF_RANGE (an id >= table.rows), with a message naming the field, the value and the limit,
// and *reject_reason set to the metric's reason (kReject* above).
absl::StatusOr<LookUpPlan> PlanLookUp(const embedding::v1::LookUpRequest& request,
                                      const RequestTable& table, int64_t max_request_ids,
                                      int64_t max_response_bytes, absl::string_view* reject_reason);

// The bags over `n` ids as offsets (bags + 1 of them, from 0 to n): `offsets` as given, when
// any, else from `lengths`. INVALID_ARGUMENT naming the first offset or length that is wrong:
// offsets that do not start at 0, decrease or do not end at n; lengths that are negative or do
// not sum to n.
absl::Status BagOffsets(const google::protobuf::RepeatedField<int64_t>& offsets,
                        const google::protobuf::RepeatedField<int64_t>& lengths, int64_t n,
                        std::vector<int64_t>* offsets_out);

// PlanLookUp's answer type alone.
absl::StatusOr<DataType> ValidateLookUpRequest(const embedding::v1::LookUpRequest& request,
                                               const RequestTable& table, int64_t max_request_ids,
                                               int64_t max_response_bytes,
                                               absl::string_view* reject_reason);

// The rows' type when `request` may be applied to `table` (its sequence is checked when it is
// applied, against the table's last). Otherwise INVALID_ARGUMENT (an unknown dtype, a negative
// id, rows whose length is not len(ids) rows of the table's dim, an element that is NaN or
// infinite or that the table's float16 or bfloat16 rounds to infinity, a sequence not below
// kSequenceLimit, 2^62) or OUT_OF_RANGE (an id >= table.rows), naming the field, the value and
// the table (an element by its row, id and index; or the limit).
absl::StatusOr<DataType> ValidateUpdateRowsRequest(const embedding::v1::UpdateRowsRequest& request,
                                                   const RequestTable& table);

}  // namespace emb::service

#endif  // EMB_SERVICE_RPC_REQUEST_VALIDATION_H_
