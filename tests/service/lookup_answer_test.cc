#include "service/rpc/lookup_answer.h"

#include <random>
#include <string>
#include <vector>

#include "embedding/v1/embedding_service.pb.h"
#include "gtest/gtest.h"

namespace emb::service {
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

TEST(SerializeLookUpAnswer, ParsesAsTheSameMessageProtobufWouldWrite) {
  std::mt19937 rng(1);
  for (size_t bytes : {size_t{4}, size_t{300}, size_t{1} << 20}) {
    std::string rows(bytes, '\0');
    for (char& c : rows) {
      c = static_cast<char>(rng() % 255 + 1);
    }
    const std::vector<int64_t> shape = {2, static_cast<int64_t>(bytes / 8), 2};
    const grpc::ByteBuffer wire = SerializeLookUpAnswer(rows, shape, DataType::kBFloat16);
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
  const std::string flat = Flatten(SerializeLookUpAnswer("", shape, DataType::kFloat32));
  embedding::v1::LookUpResponse want;
  want.mutable_shape()->Add(shape.begin(), shape.end());
  want.set_dtype(embedding::v1::DATA_TYPE_FLOAT32);
  EXPECT_EQ(flat, want.SerializeAsString());
}

}  // namespace
}  // namespace emb::service
