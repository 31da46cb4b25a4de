#include "service/rpc/lookup_answer.h"

#include <string>
#include <utility>

#include "embedding/v1/embedding_service.pb.h"
#include "grpcpp/support/slice.h"
#include "proto/convert/data_type_proto.h"

namespace emb::service {

void AppendVarint(uint64_t v, std::string* out) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

grpc::Slice RowsSlice(AnswerBuffer rows) {
  const size_t size = rows.size();
  void* data = rows.data();
  return grpc::Slice(data, size, &AnswerBuffer::Recycle, rows.ReleaseHandle());
}

namespace {

// The rows' buffer and claim, until gRPC is done with the rows' slice.
struct SentRows {
  void* buffer;  // an AnswerBuffer handle
  UnsentAnswers::Claim claim;
};

void ReleaseSentRows(void* p) {
  auto* rows = static_cast<SentRows*>(p);
  AnswerBuffer::Recycle(rows->buffer);
  delete rows;  // gives the claim back
}

}  // namespace

grpc::ByteBuffer SerializeLookUpAnswer(AnswerBuffer rows, absl::Span<const int64_t> shape,
                                       DataType dtype, UnsentAnswers::Claim claim) {
  // Fields in number order, as protobuf writes them: 1 (embeddings), 2 (shape), 3 (dtype).
  std::string head;
  if (!rows.empty()) {
    head.push_back(static_cast<char>((1 << 3) | 2));  // field 1, length-delimited
    AppendVarint(rows.size(), &head);
  }
  embedding::v1::LookUpResponse tail;
  tail.mutable_shape()->Add(shape.begin(), shape.end());
  tail.set_dtype(ToProto(dtype));
  grpc::Slice slices[3];
  int n = 0;
  if (!head.empty()) {
    slices[n++] = grpc::Slice(head);
    const size_t size = rows.size();
    void* data = rows.data();
    if (claim.bytes() == 0) {
      slices[n++] = RowsSlice(std::move(rows));
    } else {
      slices[n++] = grpc::Slice(data, size, &ReleaseSentRows,
                                new SentRows{rows.ReleaseHandle(), std::move(claim)});
    }
  }
  slices[n++] = grpc::Slice(tail.SerializeAsString());
  return grpc::ByteBuffer(slices, n);
}

}  // namespace emb::service
