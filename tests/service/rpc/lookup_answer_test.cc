#include "service/rpc/lookup_answer.h"

#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "embedding/v1/embedding_service.pb.h"
#include "gtest/gtest.h"

namespace emb::service::lookup_answer_test {
namespace {

// The ByteBuffer's bytes, in order.
std::string Flatten(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  EXPECT_TRUE(buffer.Dump(&slices).ok());
  std::string out;
  for (const grpc::Slice& s : slices) {
    out.append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  return out;
}

// A pooled answer buffer holding `bytes`.
AnswerBuffer BufferOf(const std::string& bytes, AnswerBufferPool* pool) {
  AnswerBuffer b = pool->Acquire(bytes.size());
  if (!bytes.empty()) {
    std::memcpy(b.data(), bytes.data(), bytes.size());
  }
  return b;
}

TEST(SerializeLookUpAnswer, ParsesAsTheSameMessageProtobufWouldWrite) {
  AnswerBufferPool pool;
  std::mt19937 rng(1);
  for (size_t bytes : {size_t{4}, size_t{300}, size_t{1} << 20}) {
    std::string rows(bytes, '\0');
    for (char& c : rows) {
      c = static_cast<char>(rng() % 255 + 1);
    }
    const std::vector<int64_t> shape = {2, static_cast<int64_t>(bytes / 8), 2};
    const grpc::ByteBuffer wire =
        SerializeLookUpAnswer(BufferOf(rows, &pool), shape, DataType::kBFloat16);
    const std::string flat = Flatten(wire);

    embedding::v1::LookUpResponse want;
    want.set_embeddings(rows);
    want.mutable_shape()->Add(shape.begin(), shape.end());
    want.set_dtype(embedding::v1::DATA_TYPE_BFLOAT16);
    EXPECT_EQ(flat, want.SerializeAsString()) << bytes << " bytes";

    embedding::v1::LookUpResponse got;
    ASSERT_TRUE(got.ParseFromString(flat));
    EXPECT_EQ(got.embeddings(), rows);
    EXPECT_EQ(std::vector<int64_t>(got.shape().begin(), got.shape().end()), shape);
    EXPECT_EQ(got.dtype(), embedding::v1::DATA_TYPE_BFLOAT16);
  }
}

TEST(SerializeLookUpAnswer, EmptyRowsHaveNoEmbeddingsField) {
  const std::vector<int64_t> shape = {0, 8};
  const std::string flat =
      Flatten(SerializeLookUpAnswer(AnswerBuffer(), shape, DataType::kFloat32));
  embedding::v1::LookUpResponse want;
  want.mutable_shape()->Add(shape.begin(), shape.end());
  want.set_dtype(embedding::v1::DATA_TYPE_FLOAT32);
  EXPECT_EQ(flat, want.SerializeAsString());
}

TEST(SerializeLookUpAnswer, SendsTheRowsFromTheBufferAndReturnsItWhenGrpcIsDone) {
  AnswerBufferPool pool;
  const std::string rows(3 << 20, 'r');
  AnswerBuffer buffer = BufferOf(rows, &pool);
  const std::byte* data = buffer.data();
  const std::vector<int64_t> shape = {1024, 768};
  {
    grpc::ByteBuffer wire = SerializeLookUpAnswer(std::move(buffer), shape, DataType::kFloat32);
    std::vector<grpc::Slice> slices;
    ASSERT_TRUE(wire.Dump(&slices).ok());
    ASSERT_EQ(slices.size(), 3u);
    EXPECT_EQ(static_cast<const void*>(slices[1].begin()), static_cast<const void*>(data))
        << "the rows were copied instead of sent from the answer buffer";
    EXPECT_EQ(slices[1].size(), rows.size());
    EXPECT_EQ(pool.stats().idle_bytes, 0u) << "returned while gRPC still holds the rows";
  }
  EXPECT_EQ(pool.stats().idle_bytes, size_t{4} << 20);  // the 4 MiB class block is back
  EXPECT_EQ(pool.Acquire(rows.size()).data(), data);
}

TEST(SerializeLookUpAnswer, GivesTheClaimBackWithTheRows) {
  AnswerBufferPool pool;
  UnsentAnswers unsent({.total = 8 << 20, .per_connection = 8 << 20}, nullptr);
  UnsentAnswers::Bound bound;
  absl::StatusOr<UnsentAnswers::Claim> claim = unsent.Take("peer", 4 << 20, &bound);
  ASSERT_TRUE(claim.ok());
  const std::vector<int64_t> shape = {1024, 768};
  {
    grpc::ByteBuffer wire = SerializeLookUpAnswer(BufferOf(std::string(3 << 20, 'r'), &pool), shape,
                                                  DataType::kFloat32, *std::move(claim));
    grpc::ByteBuffer copy = wire;  // gRPC's own references to the rows' slice
    wire.Clear();
    EXPECT_EQ(unsent.held_bytes(), size_t{4} << 20) << "given back while gRPC holds the rows";
    EXPECT_EQ(pool.stats().idle_bytes, 0u);
  }
  EXPECT_EQ(unsent.held_bytes(), 0u);
  EXPECT_EQ(pool.stats().idle_bytes, size_t{4} << 20);
}

}  // namespace
}  // namespace emb::service::lookup_answer_test
