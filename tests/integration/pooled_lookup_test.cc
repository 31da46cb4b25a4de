// Pooled lookups (LookUpRequest.pooling: sums, weighted sums and means of bags of ids) and
// row-wise quantized tables (int8 and int4, quantized at load or read already quantized) against
// the real embedding-server binary on loopback. Every answer is compared element by element with
// kernels::CpuPooledGather (the server's CPU and GPU backends both promise its bits) and with a
// float64 reference within the answer type's rounding; malformed bags get INVALID_ARGUMENT naming
// the problem; pooled and plain callers share batches. On the GPU through scripts/gpu-check (the
// "gpu." tests).
#include <sys/stat.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "client/embedding_client.h"
#include "embedding/v1/embedding_admin.grpc.pb.h"
#include "embedding/v1/embedding_service.grpc.pb.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "kernels/cpu_gather.h"
#include "kernels/data_type.h"
#include "kernels/quantize.h"
#include "kernels/quantize_rows.h"
#include "proto/convert/data_type_proto.h"
#include "tests/testing/loaded_server.h"
#include "tests/testing/metrics_text.h"
#include "tests/testing/server_process.h"
#include "tests/testing/table_files.h"

namespace emb::pooled_lookup_test {
namespace {

using embedding::v1::EmbeddingService;
using embedding::v1::LookUpRequest;
using embedding::v1::LookUpResponse;
using ::testing::HasSubstr;
using testing::ServerProcess;

constexpr DataType kAnswerTypes[] = {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16};
constexpr int64_t kRows = 400;

// A table as the server should hold it: its rows in their served type.
struct Table {
  std::string name;
  DataType type;
  int64_t dim;
  std::string bytes;  // kRows rows of `type`
};

// Bags of random ids with lengths 0, 1, odd and long, and weights.
struct Bags {
  std::vector<int64_t> ids;
  std::vector<int64_t> offsets;
  std::vector<float> weights;
};

Bags RandomBags(const std::vector<int64_t>& lengths, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int64_t> id(0, kRows - 1);
  std::uniform_real_distribution<float> weight(-2.0f, 2.0f);
  Bags b;
  b.offsets.push_back(0);
  for (int64_t len : lengths) {
    for (int64_t k = 0; k < len; ++k) {
      b.ids.push_back(id(rng));
      b.weights.push_back(weight(rng));
    }
    b.offsets.push_back(static_cast<int64_t>(b.ids.size()));
  }
  return b;
}

const std::vector<int64_t> kLengths = {3, 0, 1, 7, 300, 2, 0, 33, 1};

// What the server must answer, bit for bit: the CPU reference pooling.
std::string Expected(const Table& t, const Bags& b, bool weighted, bool mean, DataType out) {
  std::vector<float> scales;
  if (mean) {
    for (size_t i = 0; i + 1 < b.offsets.size(); ++i) {
      const int64_t len = b.offsets[i + 1] - b.offsets[i];
      scales.push_back(len > 0 ? 1.0f / static_cast<float>(len) : 0.0f);
    }
  }
  kernels::Bags bags{b.ids, b.offsets,
                     weighted ? absl::MakeConstSpan(b.weights) : absl::Span<const float>(), scales};
  std::string want((b.offsets.size() - 1) * static_cast<size_t>(t.dim) * ElementSize(out), '\0');
  kernels::CpuPooledGather(reinterpret_cast<const std::byte*>(t.bytes.data()), t.type, t.dim, bags,
                           out, reinterpret_cast<std::byte*>(want.data()));
  return want;
}

// "" when `got` agrees with a float64 pooling of the rows within float32 accumulation and the
// answer type's rounding; else where it does not.
std::string FarFromFloat64(const Table& t, const Bags& b, bool weighted, bool mean, DataType out,
                           const std::string& got) {
  const double unit = out == DataType::kFloat32   ? 0x1p-23
                      : out == DataType::kFloat16 ? 0x1p-10
                                                  : 0x1p-7;
  const size_t row = RowBytes(t.type, t.dim);
  for (size_t bag = 0; bag + 1 < b.offsets.size(); ++bag) {
    for (int64_t j = 0; j < t.dim; ++j) {
      double sum = 0;
      double magnitude = 0;
      for (int64_t k = b.offsets[bag]; k < b.offsets[bag + 1]; ++k) {
        const auto* r = reinterpret_cast<const uint8_t*>(t.bytes.data()) + b.ids[k] * row;
        const double v = LoadRowElement(r, t.type, t.dim, j) * (weighted ? b.weights[k] : 1.0);
        sum += v;
        magnitude += std::abs(v);
      }
      const int64_t len = b.offsets[bag + 1] - b.offsets[bag];
      if (mean && len > 0) {
        sum /= static_cast<double>(len);
        magnitude /= static_cast<double>(len);
      }
      const double value = LoadAsFloat(got.data(), out, static_cast<int64_t>(bag) * t.dim + j);
      const double tolerance =
          magnitude * (1e-6 * static_cast<double>(len + 1)) + std::abs(sum) * unit + 1e-30;
      if (std::abs(value - sum) > tolerance) {
        return absl::StrCat("bag ", bag, " element ", j, ": ", value, ", float64 says ", sum);
      }
    }
  }
  return "";
}

class PooledLookUpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (auto missing = testing::TestDeviceMissing()) {
      GTEST_SKIP() << *missing;
    }
    // A queue delay, so that concurrent pooled and plain callers share batches.
    std::vector<std::string> args = {"--drain_seconds=0", "--admin_address=127.0.0.1:0",
                                     "--admin_insecure", "--max_queue_delay_us=1000"};
    uint64_t seed = 3;
    // Value types, each from its own file.
    for (DataType type : kAnswerTypes) {
      Table t{absl::StrCat("t_", DataTypeName(type)), type, 40,
              testing::RandomRows(type, kRows * 40, seed++)};
      const std::string path = dir_.File(t.name + ".safetensors");
      const char* st = type == DataType::kFloat32   ? "F32"
                       : type == DataType::kFloat16 ? "F16"
                                                    : "BF16";
      ASSERT_TRUE(
          testing::WriteFile(path, testing::SafetensorsFile({{"w", st, {kRows, 40}, t.bytes}}))
              .ok());
      args.push_back(absl::StrCat("--table=", t.name, "=", path));
      tables_.push_back(std::move(t));
    }
    // Quantized at load from float32 (int4 of an odd dim too), and read already quantized.
    struct Quantized {
      const char* name;
      DataType type;
      int64_t dim;
      bool in_file;
    };
    for (const Quantized& q : {Quantized{"q8", DataType::kInt8Rowwise, 40, false},
                               Quantized{"q4", DataType::kInt4Rowwise, 40, false},
                               Quantized{"q4_odd", DataType::kInt4Rowwise, 13, false},
                               Quantized{"q8_file", DataType::kInt8Rowwise, 24, true}}) {
      const std::string floats = testing::RandomRows(DataType::kFloat32, kRows * q.dim, seed++);
      Table t{q.name, q.type, q.dim, std::string(kRows * RowBytes(q.type, q.dim), '\0')};
      ASSERT_TRUE(EncodeRows(reinterpret_cast<const std::byte*>(floats.data()), DataType::kFloat32,
                             kRows, q.dim, q.type, reinterpret_cast<std::byte*>(t.bytes.data()))
                      .ok());
      const std::string path = dir_.File(absl::StrCat(q.name, ".safetensors"));
      if (q.in_file) {
        const std::string header = absl::StrCat(
            "{\"__metadata__\":{\"emb_layout\":\"", DataTypeName(q.type),
            "\"},\"w\":{\"dtype\":"
            "\"U8\",\"shape\":[",
            kRows, ",", RowBytes(q.type, q.dim), "],\"data_offsets\":[0,", t.bytes.size(), "]}}");
        ASSERT_TRUE(testing::WriteFile(path, testing::SafetensorsFromHeader(header, t.bytes)).ok());
        args.push_back(absl::StrCat("--table=", q.name, "=", path));
      } else {
        ASSERT_TRUE(testing::WriteFile(
                        path, testing::SafetensorsFile({{"w", "F32", {kRows, q.dim}, floats}}))
                        .ok());
        args.push_back(absl::StrCat("--table=", q.name, "=", path, ",quantize=",
                                    q.type == DataType::kInt8Rowwise ? "int8" : "int4"));
      }
      tables_.push_back(std::move(t));
    }
    auto server = ServerProcess::Start(args);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    stub_ = EmbeddingService::NewStub(
        grpc::CreateChannel(server_->target(), grpc::InsecureChannelCredentials()));
  }

  absl::StatusOr<LookUpResponse> Call(const LookUpRequest& request) {
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(60)));
    LookUpResponse response;
    grpc::Status s = stub_->LookUp(&ctx, request, &response);
    if (!s.ok()) {
      return client::FromGrpcStatus(s);
    }
    return response;
  }

  static LookUpRequest Pooled(const Table& t, const Bags& b, bool weighted, bool mean,
                              DataType out) {
    LookUpRequest r;
    r.set_table(t.name);
    r.mutable_ids()->Assign(b.ids.begin(), b.ids.end());
    r.mutable_offsets()->Assign(b.offsets.begin(), b.offsets.end());
    if (weighted) {
      r.mutable_weights()->Assign(b.weights.begin(), b.weights.end());
    }
    r.set_pooling(mean ? embedding::v1::POOLING_MEAN : embedding::v1::POOLING_SUM);
    r.set_dtype(ToProto(out));
    return r;
  }

  testing::TempDir dir_;
  std::vector<Table> tables_;
  std::unique_ptr<ServerProcess> server_;
  std::unique_ptr<EmbeddingService::Stub> stub_;
};

TEST_F(PooledLookUpTest, SumsWeightedSumsAndMeansOfEveryTableTypeInEveryAnswerType) {
  uint64_t seed = 100;
  for (const Table& t : tables_) {
    for (DataType out : kAnswerTypes) {
      for (int mode = 0; mode < 3; ++mode) {
        const bool weighted = mode == 1;
        const bool mean = mode == 2;
        const Bags b = RandomBags(kLengths, seed++);
        auto answer = Call(Pooled(t, b, weighted, mean, out));
        ASSERT_TRUE(answer.ok()) << answer.status() << " table " << t.name;
        EXPECT_THAT(answer->shape(), ::testing::ElementsAre(kLengths.size(), t.dim));
        EXPECT_EQ(answer->dtype(), ToProto(out));
        const std::string want = Expected(t, b, weighted, mean, out);
        EXPECT_TRUE(answer->embeddings() == want) << t.name << " " << DataTypeName(out) << " mode "
                                                  << mode << ": not CpuPooledGather's bits";
        EXPECT_EQ(FarFromFloat64(t, b, weighted, mean, out, answer->embeddings()), "")
            << t.name << " " << DataTypeName(out) << " mode " << mode;
      }
    }
  }
}

TEST_F(PooledLookUpTest, LengthsAndTwoDimensionalIdsGiveTheSameBagsAsOffsets) {
  const Table& t = tables_[0];
  const Bags b = RandomBags({4, 4, 4, 4, 4, 4}, 7);
  const std::string want = Expected(t, b, false, false, DataType::kFloat32);
  LookUpRequest by_lengths;
  by_lengths.set_table(t.name);
  by_lengths.mutable_ids()->Assign(b.ids.begin(), b.ids.end());
  by_lengths.set_pooling(embedding::v1::POOLING_SUM);
  for (int i = 0; i < 6; ++i) {
    by_lengths.add_lengths(4);
  }
  auto answer = Call(by_lengths);
  ASSERT_TRUE(answer.ok()) << answer.status();
  EXPECT_TRUE(answer->embeddings() == want);
  LookUpRequest by_shape = by_lengths;
  by_shape.clear_lengths();
  by_shape.add_shape(2);
  by_shape.add_shape(3);
  by_shape.add_shape(4);  // the last axis is the bag
  answer = Call(by_shape);
  ASSERT_TRUE(answer.ok()) << answer.status();
  EXPECT_THAT(answer->shape(), ::testing::ElementsAre(2, 3, t.dim));
  EXPECT_TRUE(answer->embeddings() == want);
  // 12 bags in OK answers so far (the metrics are scraped from the server's /metrics).
  // (counted before each answer is sent).
  auto metrics = testing::HttpGet(server_->metrics_port(), "/metrics");
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  EXPECT_EQ(testing::Sample(*metrics,
                            absl::StrCat("embedding_pooled_bags_total{table=\"", t.name, "\"}")),
            12);
}

TEST_F(PooledLookUpTest, QuantizedTablesAnswerTheirDequantizedRowsAndListTheirTypeAndBytes) {
  uint64_t seed = 500;
  for (const Table& t : tables_) {
    std::vector<int64_t> ids(257);
    std::mt19937_64 rng(seed++);
    for (int64_t& id : ids) {
      id = static_cast<int64_t>(rng() % kRows);
    }
    for (DataType out : kAnswerTypes) {
      LookUpRequest r;
      r.set_table(t.name);
      r.mutable_ids()->Assign(ids.begin(), ids.end());
      r.set_dtype(ToProto(out));
      auto answer = Call(r);
      ASSERT_TRUE(answer.ok()) << answer.status();
      std::string want(ids.size() * static_cast<size_t>(t.dim) * ElementSize(out), '\0');
      kernels::CpuGather(reinterpret_cast<const std::byte*>(t.bytes.data()), t.type, t.dim, ids,
                         out, reinterpret_cast<std::byte*>(want.data()));
      EXPECT_TRUE(answer->embeddings() == want) << t.name << " " << DataTypeName(out);
    }
  }
  // A quantized table answers float32 unless asked otherwise; a quantized answer type is refused.
  LookUpRequest r;
  r.set_table("q8");
  r.add_ids(1);
  auto answer = Call(r);
  ASSERT_TRUE(answer.ok()) << answer.status();
  EXPECT_EQ(answer->dtype(), embedding::v1::DATA_TYPE_FLOAT32);
  r.set_dtype(embedding::v1::DATA_TYPE_INT8_ROWWISE);
  EXPECT_THAT(Call(r).status().message(), HasSubstr("is a table type"));

  auto client = client::EmbeddingClient::Connect(server_->target());
  embedding::v1::ListTablesResponse listed;
  {
    grpc::ClientContext ctx;
    ASSERT_TRUE(stub_->ListTables(&ctx, embedding::v1::ListTablesRequest(), &listed).ok());
  }
  for (const Table& t : tables_) {
    bool found = false;
    for (const auto& info : listed.tables()) {
      if (info.name() == t.name) {
        found = true;
        EXPECT_EQ(info.dtype(), ToProto(t.type)) << t.name;
        EXPECT_EQ(info.dim(), t.dim) << t.name;
        EXPECT_EQ(info.bytes(), static_cast<int64_t>(t.bytes.size())) << t.name;
      }
    }
    EXPECT_TRUE(found) << t.name;
  }
}

TEST_F(PooledLookUpTest, MalformedBagsAreRefusedNamingTheProblem) {
  const Table& t = tables_[0];
  auto refused = [&](const std::function<void(LookUpRequest&)>& edit) {
    LookUpRequest r;
    r.set_table(t.name);
    for (int64_t id : {1, 2, 3, 4, 5}) {
      r.add_ids(id);
    }
    r.set_pooling(embedding::v1::POOLING_SUM);
    edit(r);
    absl::Status s = Call(r).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    return std::string(s.message());
  };
  auto offsets = [](std::vector<int64_t> o) {
    return [o](LookUpRequest& r) { r.mutable_offsets()->Assign(o.begin(), o.end()); };
  };
  EXPECT_THAT(refused(offsets({0, 3, 2, 5})), HasSubstr("offsets[2] = 2 is below offsets[1] = 3"));
  EXPECT_THAT(refused(offsets({0, 3, 9})), HasSubstr("offsets[2] = 9 is past the end of ids"));
  EXPECT_THAT(refused(offsets({1, 3, 5})), HasSubstr("offsets[0] = 1"));
  EXPECT_THAT(refused(offsets({0, 3, 4})), HasSubstr("must be len(ids) = 5"));
  EXPECT_THAT(refused([](LookUpRequest& r) {
                r.add_lengths(2);
                r.add_lengths(2);
              }),
              HasSubstr("lengths sum to 4 but ids has 5"));
  EXPECT_THAT(refused([](LookUpRequest& r) { r.add_lengths(-1); }), HasSubstr("negative"));
  EXPECT_THAT(refused([](LookUpRequest& r) {
                r.add_weights(1);
                r.add_weights(2);
              }),
              HasSubstr("weights has 2 values for 5 ids"));
  EXPECT_THAT(refused([](LookUpRequest& r) {
                r.set_pooling(embedding::v1::POOLING_MEAN);
                for (int i = 0; i < 5; ++i) {
                  r.add_weights(1);
                }
              }),
              HasSubstr("weights need POOLING_SUM"));
  // A weight that is not finite poisons its bag (issue 41, item 7c): refused, naming it.
  for (const float bad :
       {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
        -std::numeric_limits<float>::infinity()}) {
    EXPECT_THAT(refused([bad](LookUpRequest& r) {
                  for (int i = 0; i < 5; ++i) {
                    r.add_weights(i == 3 ? bad : 1);
                  }
                }),
                HasSubstr("weights[3] = " +
                          std::string(std::isnan(bad) ? "NaN"
                                      : bad > 0       ? "+inf"
                                                      : "-inf") +
                          " (for ids[3] = 4) is not finite"));
  }
  EXPECT_THAT(refused([](LookUpRequest& r) {
                r.set_pooling(embedding::v1::POOLING_UNSPECIFIED);
                r.add_offsets(0);
                r.add_offsets(5);
              }),
              HasSubstr("need pooling"));
  EXPECT_THAT(refused([](LookUpRequest& r) {
                r.add_offsets(0);
                r.add_offsets(5);
                r.add_lengths(5);
              }),
              HasSubstr("not both"));
  EXPECT_THAT(
      refused([](LookUpRequest& r) { r.set_pooling(static_cast<embedding::v1::Pooling>(9)); }),
      HasSubstr("is not a Pooling"));
  // An id out of range inside a bag is OUT_OF_RANGE, as in a plain lookup.
  LookUpRequest r;
  r.set_table(t.name);
  r.add_ids(kRows);
  r.set_pooling(embedding::v1::POOLING_SUM);
  EXPECT_EQ(Call(r).status().code(), absl::StatusCode::kOutOfRange);
}

// Pooled and plain callers at once, with a queue delay so that they share batches: every answer
// is its own, bit for bit.
TEST_F(PooledLookUpTest, PooledAndPlainCallersAtOnceEachGetTheirOwnAnswer) {
  constexpr int kThreads = 8;
  constexpr int kCalls = 30;
  std::vector<std::thread> threads;
  std::vector<std::string> failures(kThreads);
  for (int c = 0; c < kThreads; ++c) {
    threads.emplace_back([&, c] {
      std::mt19937_64 rng(static_cast<uint64_t>(c));
      for (int i = 0; i < kCalls && failures[c].empty(); ++i) {
        const Table& t = tables_[(c + i) % tables_.size()];
        const DataType out = kAnswerTypes[i % 3];
        const Bags b = RandomBags({1 + static_cast<int64_t>(rng() % 9), 0, 5}, rng());
        LookUpRequest r;
        std::string want;
        if ((c + i) % 2 == 0) {
          const bool mean = i % 3 == 0;
          const bool weighted = !mean && i % 3 == 1;
          r = Pooled(t, b, weighted, mean, out);
          want = Expected(t, b, weighted, mean, out);
        } else {
          r.set_table(t.name);
          r.mutable_ids()->Assign(b.ids.begin(), b.ids.end());
          r.set_dtype(ToProto(out));
          want.resize(b.ids.size() * static_cast<size_t>(t.dim) * ElementSize(out));
          kernels::CpuGather(reinterpret_cast<const std::byte*>(t.bytes.data()), t.type, t.dim,
                             b.ids, out, reinterpret_cast<std::byte*>(want.data()));
        }
        auto answer = Call(r);
        if (!answer.ok()) {
          failures[c] = answer.status().ToString();
        } else if (answer->embeddings() != want) {
          failures[c] = absl::StrCat("caller ", c, " call ", i, " (table ", t.name,
                                     r.pooling() != 0 ? ", pooled" : ", plain", "): wrong rows");
        }
      }
    });
  }
  for (std::thread& t : threads) {
    t.join();
  }
  for (const std::string& f : failures) {
    EXPECT_EQ(f, "");
  }
}

// An update of a quantized table is given in floats and quantized on arrival.
TEST_F(PooledLookUpTest, UpdatesOfAQuantizedTableAreQuantizedOnArrival) {
  ASSERT_NE(server_->admin_port(), 0);
  auto admin = embedding::v1::EmbeddingAdminService::NewStub(
      grpc::CreateChannel(server_->admin_target(), grpc::InsecureChannelCredentials()));
  for (const char* name : {"q8", "q4_odd"}) {
    Table& t = *std::find_if(tables_.begin(), tables_.end(),
                             [&](const Table& x) { return x.name == name; });
    const std::vector<int64_t> ids = {3, 77, 3, 399};
    const std::string rows = testing::RandomRows(DataType::kFloat32, 4 * t.dim, 9);
    embedding::v1::UpdateRowsRequest m;
    m.set_table(t.name);
    m.mutable_ids()->Assign(ids.begin(), ids.end());
    m.set_rows(rows);
    m.set_dtype(embedding::v1::DATA_TYPE_FLOAT32);
    m.set_sequence(1);
    grpc::ClientContext ctx;
    auto stream = admin->UpdateRows(&ctx);
    embedding::v1::UpdateRowsResponse ack;
    ASSERT_TRUE(stream->Write(m));
    ASSERT_TRUE(stream->Read(&ack)) << client::FromGrpcStatus(stream->Finish());
    EXPECT_EQ(ack.rows(), 3);
    stream->WritesDone();
    EXPECT_TRUE(stream->Finish().ok());
    const size_t row = RowBytes(t.type, t.dim);
    for (size_t k : {size_t{1}, size_t{2}, size_t{3}}) {  // the last row of id 3 wins
      ASSERT_TRUE(EncodeRows(reinterpret_cast<const std::byte*>(rows.data()) + k * t.dim * 4,
                             DataType::kFloat32, 1, t.dim, t.type,
                             reinterpret_cast<std::byte*>(t.bytes.data()) + ids[k] * row)
                      .ok());
    }
    LookUpRequest r;
    r.set_table(t.name);
    r.mutable_ids()->Assign(ids.begin(), ids.end());
    auto answer = Call(r);
    ASSERT_TRUE(answer.ok()) << answer.status();
    std::string want(ids.size() * static_cast<size_t>(t.dim) * 4, '\0');
    kernels::CpuGather(reinterpret_cast<const std::byte*>(t.bytes.data()), t.type, t.dim, ids,
                       DataType::kFloat32, reinterpret_cast<std::byte*>(want.data()));
    EXPECT_TRUE(answer->embeddings() == want) << name;
  }
}

// A table quantized at load from a version directory is saved as its quantized rows (a U8 tensor
// with its layout in the metadata) and a restart serves those same rows.
TEST(QuantizedVersionsTest, SaveWritesTheQuantizedRowsAndARestartServesThem) {
  if (auto missing = testing::TestDeviceMissing()) {
    GTEST_SKIP() << *missing;
  }
  testing::TempDir dir;
  const int64_t dim = 9;
  const std::string floats = testing::RandomRows(DataType::kFloat32, kRows * dim, 77);
  ASSERT_EQ(mkdir(dir.File("1").c_str(), 0755), 0);
  ASSERT_TRUE(testing::WriteFile(dir.File("1/w.safetensors"),
                                 testing::SafetensorsFile({{"w", "F32", {kRows, dim}, floats}}))
                  .ok());
  const std::vector<std::string> args = {"--drain_seconds=0", "--admin_address=127.0.0.1:0",
                                         "--admin_insecure",
                                         absl::StrCat("--table=q=", dir.path(), ",quantize=int4")};
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < kRows; i += 3) {
    ids.push_back(i);
  }
  auto serve = [&](ServerProcess& server) -> std::string {
    auto client = client::EmbeddingClient::Connect(server.target());
    auto result = client->LookUp("q", ids, {}, DataType::kFloat32, absl::Seconds(30));
    EXPECT_TRUE(result.ok()) << result.status();
    return result.ok() ? result->data : "";
  };
  std::string before;
  {
    auto server = ServerProcess::Start(args);
    ASSERT_TRUE(server.ok()) << server.status();
    before = serve(**server);
    auto admin = embedding::v1::EmbeddingAdminService::NewStub(
        grpc::CreateChannel((*server)->admin_target(), grpc::InsecureChannelCredentials()));
    grpc::ClientContext ctx;
    embedding::v1::SaveTableRequest request;
    request.set_table("q");
    embedding::v1::SaveTableResponse saved;
    ASSERT_TRUE(admin->SaveTable(&ctx, request, &saved).ok());
    EXPECT_EQ(saved.version(), 2);
  }
  const std::string table(kRows * RowBytes(DataType::kInt4Rowwise, dim), '\0');
  std::string want(ids.size() * dim * 4, '\0');
  {
    std::string q = table;
    ASSERT_TRUE(EncodeRows(reinterpret_cast<const std::byte*>(floats.data()), DataType::kFloat32,
                           kRows, dim, DataType::kInt4Rowwise,
                           reinterpret_cast<std::byte*>(q.data()))
                    .ok());
    kernels::CpuGather(reinterpret_cast<const std::byte*>(q.data()), DataType::kInt4Rowwise, dim,
                       ids, DataType::kFloat32, reinterpret_cast<std::byte*>(want.data()));
  }
  EXPECT_TRUE(before == want);
  auto server = ServerProcess::Start(args);  // now on version 2, stored as int4 rows
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_THAT((*server)->log(), HasSubstr("int4_rowwise, "));  // read as stored, not re-quantized
  EXPECT_THAT((*server)->log(), HasSubstr("(version 2,"));
  EXPECT_TRUE(serve(**server) == want);
}

}  // namespace
}  // namespace emb::pooled_lookup_test
