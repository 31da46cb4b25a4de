// The wire form of a LookUpResponse built around rows that are already in memory, so that gRPC
// sends the rows from there: the answer is never copied by protobuf serialization (for a
// 2048 x 768 float32 answer that is 6 MiB per call not copied again).
// Thread-compatible (plain functions).
#ifndef EMB_SERVICE_RPC_LOOKUP_ANSWER_H_
#define EMB_SERVICE_RPC_LOOKUP_ANSWER_H_

#include <cstdint>
#include <string>

#include "absl/types/span.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/slice.h"
#include "kernels/data_type.h"
#include "service/batch/answer_buffer.h"
#include "service/rpc/unsent_answers.h"

namespace emb::service {

// A serialized LookUpResponse { embeddings = rows; shape; dtype } in three slices: the tag and
// length of `embeddings`, the rows themselves (taken over, not copied: the slice's destroy
// callback returns the buffer to its pool once gRPC is done with it, on whatever thread that
// is), then `shape` and `dtype`. Parses as the same message as LookUpResponse::SerializeAsString()
// gives. `claim`, the rows' share of the bound on unsent answers, is given back with the buffer.
grpc::ByteBuffer SerializeLookUpAnswer(AnswerBuffer rows, absl::Span<const int64_t> shape,
                                       DataType dtype,
                                       UnsentAnswers::Claim claim = UnsentAnswers::Claim());

// For answers written by hand around rows in memory: `v` as a protobuf varint, appended to
// `out`; and a slice of `rows` that takes the buffer over (back to its pool once gRPC is done).
void AppendVarint(uint64_t v, std::string* out);
grpc::Slice RowsSlice(AnswerBuffer rows);

}  // namespace emb::service

#endif  // EMB_SERVICE_RPC_LOOKUP_ANSWER_H_
