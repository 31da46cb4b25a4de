// EmbeddingClient's messages: ToLookUpRequest with and without the pooled fields, Pooling names,
// FromLookUpResponse (pooled shapes; quantized types are tables' only), and, against an
// in-process fake EmbeddingService, LookUp(spec) sending every field and ListTables reporting
// quantized tables and their bytes. The real server's pooled answers are checked by
// tests/client/pooled_lookup_check.sh.
#include "client/embedding_client.h"

#include <grpcpp/server.h>
#include <grpcpp/server_builder.h>
#include <grpcpp/server_context.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "embedding/v1/embedding_service.grpc.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/data_type.h"
#include "tests/testing/status_matchers.h"

namespace emb::client::embedding_client_test {
namespace {

namespace pb = ::embedding::v1;
using ::emb::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr absl::Duration kTimeout = absl::Seconds(20);

TEST(ToLookUpRequest, PlainSpecLeavesThePooledFieldsUnset) {
  LookUpRequestSpec spec;
  spec.table = "t";
  spec.ids = {4, 5, 6};
  spec.shape = {3};
  spec.dtype = DataType::kBFloat16;
  pb::LookUpRequest request;
  request.set_pooling(pb::POOLING_MEAN);  // cleared first
  request.add_offsets(9);
  ToLookUpRequest(spec, &request);
  EXPECT_EQ(request.table(), "t");
  EXPECT_THAT(request.ids(), ElementsAre(4, 5, 6));
  EXPECT_THAT(request.shape(), ElementsAre(3));
  EXPECT_EQ(request.dtype(), pb::DATA_TYPE_BFLOAT16);
  EXPECT_EQ(request.pooling(), pb::POOLING_UNSPECIFIED);
  EXPECT_THAT(request.offsets(), IsEmpty());
  EXPECT_THAT(request.lengths(), IsEmpty());
  EXPECT_THAT(request.weights(), IsEmpty());
}

TEST(ToLookUpRequest, SumWithOffsetsAndWeights) {
  LookUpRequestSpec spec;
  spec.ids = {1, 2, 3, 4, 5};
  spec.pooling = Pooling::kSum;
  spec.offsets = {0, 3, 3, 5};
  spec.weights = {0.5f, -1.0f, 2.0f, 0.25f, 3.0f};
  pb::LookUpRequest request;
  ToLookUpRequest(spec, &request);
  EXPECT_EQ(request.pooling(), pb::POOLING_SUM);
  EXPECT_THAT(request.offsets(), ElementsAre(0, 3, 3, 5));
  EXPECT_THAT(request.lengths(), IsEmpty());
  EXPECT_THAT(request.weights(), ElementsAre(0.5f, -1.0f, 2.0f, 0.25f, 3.0f));
  EXPECT_THAT(request.shape(), IsEmpty());
  EXPECT_EQ(request.dtype(), pb::DATA_TYPE_UNSPECIFIED);
}

TEST(ToLookUpRequest, MeanWithLengths) {
  LookUpRequestSpec spec;
  spec.ids = {1, 2, 3};
  spec.pooling = Pooling::kMean;
  spec.lengths = {2, 0, 1};
  pb::LookUpRequest request;
  ToLookUpRequest(spec, &request);
  EXPECT_EQ(request.pooling(), pb::POOLING_MEAN);
  EXPECT_THAT(request.lengths(), ElementsAre(2, 0, 1));
  EXPECT_THAT(request.offsets(), IsEmpty());
}

TEST(ToLookUpRequest, MeanOverTheLastAxisOfShape) {
  LookUpRequestSpec spec;
  spec.ids = {1, 2, 3, 4, 5, 6};
  spec.shape = {2, 3};
  spec.pooling = Pooling::kMean;
  pb::LookUpRequest request;
  ToLookUpRequest(spec, &request);
  EXPECT_EQ(request.pooling(), pb::POOLING_MEAN);
  EXPECT_THAT(request.shape(), ElementsAre(2, 3));
}

// Issue 40: --target=localhost dialled 443, gRPC's port for a host without one.
TEST(TargetWithDefaultPort, AddsThePortOnlyToAHostWithoutOne) {
  for (const auto& [target, want] : std::vector<std::pair<std::string, std::string>>{
           {"localhost", "localhost:50051"},
           {"emb.ns.svc", "emb.ns.svc:50051"},
           {"10.0.0.7", "10.0.0.7:50051"},
           {"[::1]", "[::1]:50051"},
           {"dns:///emb.ns.svc", "dns:///emb.ns.svc:50051"},
           {"dns://8.8.8.8/emb.ns.svc", "dns://8.8.8.8/emb.ns.svc:50051"},
           {"dns:emb", "dns:emb:50051"},
           {"localhost:7000", "localhost:7000"},
           {"[::1]:7000", "[::1]:7000"},
           {"dns:///emb.ns.svc:7000", "dns:///emb.ns.svc:7000"},
           {"::1", "::1"},
           {"unix:/tmp/emb.sock", "unix:/tmp/emb.sock"},
           {"unix-abstract:emb", "unix-abstract:emb"},
           {"ipv4:10.0.0.1:7000,10.0.0.2:7000", "ipv4:10.0.0.1:7000,10.0.0.2:7000"},
           {"xds:///emb", "xds:///emb"},
           {"", ""},
       }) {
    EXPECT_EQ(TargetWithDefaultPort(target, 50051), want) << target;
  }
}

TEST(Pooling, NamesParseBack) {
  for (Pooling p : {Pooling::kNone, Pooling::kSum, Pooling::kMean}) {
    Pooling parsed = Pooling::kSum == p ? Pooling::kMean : Pooling::kSum;
    ASSERT_TRUE(ParsePooling(PoolingName(p), &parsed)) << PoolingName(p);
    EXPECT_EQ(parsed, p);
  }
  EXPECT_STREQ(PoolingName(Pooling::kSum), "sum");
  EXPECT_STREQ(PoolingName(Pooling::kMean), "mean");
  Pooling unchanged = Pooling::kSum;
  for (const char* bad : {"", "SUM", "max", "POOLING_SUM", "mean "}) {
    EXPECT_FALSE(ParsePooling(bad, &unchanged)) << bad;
    EXPECT_EQ(unchanged, Pooling::kSum);
  }
}

// A response of `rows` x `dim` float32 elements counting up from 0.
pb::LookUpResponse FloatResponse(int64_t rows, int64_t dim) {
  pb::LookUpResponse response;
  std::vector<float> values(rows * dim);
  for (size_t i = 0; i < values.size(); ++i) {
    values[i] = static_cast<float>(i);
  }
  response.set_embeddings(
      std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float)));
  response.add_shape(rows);
  response.add_shape(dim);
  response.set_dtype(pb::DATA_TYPE_FLOAT32);
  return response;
}

TEST(FromLookUpResponse, PooledBagsShape) {
  pb::LookUpResponse response = FloatResponse(3, 2);
  absl::StatusOr<LookUpResult> result = FromLookUpResponse(&response);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_THAT(result->shape, ElementsAre(3, 2));
  EXPECT_THAT(result->ToFloat32(), ElementsAre(0, 1, 2, 3, 4, 5));
}

TEST(FromLookUpResponse, QuantizedAnswerTypeIsInternal) {
  for (pb::DataType t : {pb::DATA_TYPE_INT8_ROWWISE, pb::DATA_TYPE_INT4_ROWWISE}) {
    pb::LookUpResponse response = FloatResponse(1, 2);
    response.set_dtype(t);
    EXPECT_THAT(FromLookUpResponse(&response),
                StatusIs(absl::StatusCode::kInternal, HasSubstr("table-only dtype")))
        << pb::DataType_Name(t);
  }
}

// A fake EmbeddingService: LookUp records its request and answers one float32 row of 2 elements
// per bag (offsets or lengths given) or per id; ListTables describes a quantized table.
class FakeService final : public pb::EmbeddingService::Service {
 public:
  grpc::Status LookUp(grpc::ServerContext*, const pb::LookUpRequest* request,
                      pb::LookUpResponse* response) override {
    absl::MutexLock lock(&mu_);
    last_ = *request;
    const int64_t rows = request->offsets_size() > 0   ? request->offsets_size() - 1
                         : request->lengths_size() > 0 ? request->lengths_size()
                                                       : request->ids_size();
    *response = FloatResponse(rows, 2);
    return grpc::Status::OK;
  }

  grpc::Status ListTables(grpc::ServerContext*, const pb::ListTablesRequest*,
                          pb::ListTablesResponse* response) override {
    pb::TableInfo* q = response->add_tables();
    q->set_name("q8");
    q->set_rows(1000);
    q->set_dim(64);
    q->set_dtype(pb::DATA_TYPE_INT8_ROWWISE);
    q->set_device("cpu");
    q->set_is_default(true);
    q->set_bytes(1000 * (64 + 8));
    pb::TableInfo* q4 = response->add_tables();
    q4->set_name("q4");
    q4->set_rows(10);
    q4->set_dim(3);
    q4->set_dtype(pb::DATA_TYPE_INT4_ROWWISE);
    q4->set_bytes(10 * (2 + 4));
    pb::TableInfo* f = response->add_tables();
    f->set_name("f");
    f->set_rows(int64_t{1} << 32);
    f->set_dim(128);
    f->set_dtype(pb::DATA_TYPE_FLOAT16);
    f->set_bytes((int64_t{1} << 32) * 128 * 2);
    f->set_device("cuda:0");
    f->set_host_tier(true);
    f->set_cache_rows(int64_t{1} << 28);
    f->set_device_bytes((int64_t{1} << 36) + 12345);
    return grpc::Status::OK;
  }

  pb::LookUpRequest last() {
    absl::MutexLock lock(&mu_);
    return last_;
  }

 private:
  absl::Mutex mu_;
  pb::LookUpRequest last_ ABSL_GUARDED_BY(mu_);
};

// An in-process server with `service`, and a client on it.
class InProcessServer {
 public:
  explicit InProcessServer(grpc::Service* service) {
    grpc::ServerBuilder builder;
    builder.RegisterService(service);
    server_ = builder.BuildAndStart();
    client_ =
        std::make_unique<EmbeddingClient>(server_->InProcessChannel(DefaultChannelArguments()));
  }
  ~InProcessServer() {
    client_.reset();
    server_->Shutdown();
  }
  EmbeddingClient& client() { return *client_; }

 private:
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<EmbeddingClient> client_;
};

TEST(EmbeddingClient, LookUpSpecSendsThePooledFields) {
  FakeService fake;
  InProcessServer server(&fake);
  LookUpRequestSpec spec;
  spec.table = "t";
  spec.ids = {7, 8, 9};
  spec.dtype = DataType::kFloat16;
  spec.pooling = Pooling::kSum;
  spec.offsets = {0, 1, 3};
  spec.weights = {1.5f, 2.0f, -0.5f};
  absl::StatusOr<LookUpResult> result = server.client().LookUp(spec, kTimeout);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_THAT(result->shape, ElementsAre(2, 2));
  pb::LookUpRequest expected;
  ToLookUpRequest(spec, &expected);
  EXPECT_EQ(fake.last().SerializeAsString(), expected.SerializeAsString());
  EXPECT_EQ(fake.last().pooling(), pb::POOLING_SUM);
  EXPECT_THAT(fake.last().weights(), ElementsAre(1.5f, 2.0f, -0.5f));
}

TEST(EmbeddingClient, LookUpAsyncSendsThePooledFields) {
  FakeService fake;
  InProcessServer server(&fake);
  LookUpRequestSpec spec;
  spec.ids = {1, 2, 3, 4};
  spec.pooling = Pooling::kMean;
  spec.lengths = {3, 0, 1};
  absl::Mutex mu;
  std::optional<absl::StatusOr<LookUpResult>> got;
  server.client().LookUpAsync(spec, kTimeout, [&](absl::StatusOr<LookUpResult> r) {
    absl::MutexLock lock(&mu);
    got = std::move(r);
  });
  {
    absl::MutexLock lock(&mu);
    mu.Await(absl::Condition(
        +[](std::optional<absl::StatusOr<LookUpResult>>* g) { return g->has_value(); }, &got));
    ASSERT_TRUE(got->ok()) << got->status();
    EXPECT_THAT((*got)->shape, ElementsAre(3, 2));
  }
  EXPECT_EQ(fake.last().pooling(), pb::POOLING_MEAN);
  EXPECT_THAT(fake.last().lengths(), ElementsAre(3, 0, 1));
  EXPECT_THAT(fake.last().offsets(), IsEmpty());
}

TEST(EmbeddingClient, ListTablesReportsQuantizedTypesAndBytes) {
  FakeService fake;
  InProcessServer server(&fake);
  absl::StatusOr<std::vector<TableInfo>> tables = server.client().ListTables(kTimeout);
  ASSERT_TRUE(tables.ok()) << tables.status();
  ASSERT_EQ(tables->size(), 3u);
  EXPECT_EQ((*tables)[0].name, "q8");
  EXPECT_EQ((*tables)[0].dtype, DataType::kInt8Rowwise);
  EXPECT_EQ((*tables)[0].bytes, static_cast<int64_t>(1000 * RowBytes(DataType::kInt8Rowwise, 64)));
  EXPECT_STREQ(DataTypeName((*tables)[0].dtype), "int8_rowwise");
  EXPECT_EQ((*tables)[1].dtype, DataType::kInt4Rowwise);
  EXPECT_EQ((*tables)[1].bytes, static_cast<int64_t>(10 * RowBytes(DataType::kInt4Rowwise, 3)));
  EXPECT_EQ((*tables)[2].dtype, DataType::kFloat16);
  EXPECT_EQ((*tables)[2].bytes, int64_t{1} << 40);
}

TEST(EmbeddingClient, ListTablesReportsWhereEachTableLives) {
  FakeService fake;
  InProcessServer server(&fake);
  absl::StatusOr<std::vector<TableInfo>> tables = server.client().ListTables(kTimeout);
  ASSERT_TRUE(tables.ok()) << tables.status();
  ASSERT_EQ(tables->size(), 3u);
  const TableInfo& f = (*tables)[2];
  EXPECT_EQ(f.device, "cuda:0");
  EXPECT_TRUE(f.host_tier);
  EXPECT_EQ(f.cache_rows, int64_t{1} << 28);
  EXPECT_EQ(f.device_bytes, (int64_t{1} << 36) + 12345);
  EXPECT_FALSE((*tables)[0].host_tier);
  EXPECT_EQ((*tables)[0].cache_rows, 0);
  EXPECT_EQ((*tables)[0].device_bytes, 0);
}

}  // namespace
}  // namespace emb::client::embedding_client_test
