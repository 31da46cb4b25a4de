// AdminClient and RowWriter against an in-process gRPC server that keeps the UpdateRows contract
// of embedding_admin.proto on a small float32 table of its own (one message at a time, in order,
// one ack each; the first bad message ends the stream with a status and applies nothing), with
// modes that break it (a wrong ack, an early OK end, no acks at all); SaveTable against the same
// fake, which keeps each saved version's rows and sequence (and a mode whose save never ends), and
// LoadVersion, which serves one of them again (0: the newest, unpinned; else pinned).
// The real server's side is covered by admin_client_server_test, tests/tools/admin_update_check.sh
// tests/tools/save_table_check.sh and tests/tools/load_version_check.sh.
#include "client/admin_client.h"

#include <grpcpp/server.h>
#include <grpcpp/server_builder.h>
#include <grpcpp/server_context.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "client/embedding_client.h"
#include "embedding/v1/embedding_admin.grpc.pb.h"
#include "embedding/v1/embedding_service.grpc.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/data_type.h"
#include "tests/testing/status_matchers.h"

namespace emb::client::admin_client_test {
namespace {

namespace pb = ::embedding::v1;
using ::emb::testing::IsOk;
using ::emb::testing::StatusIs;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr int64_t kRows = 100;
constexpr int64_t kDim = 4;
constexpr absl::Duration kTimeout = absl::Seconds(20);

// The fake's table: kRows x kDim float32, "t", the default. Applies messages as the contract
// says and records them.
class FakeAdmin final : public pb::EmbeddingAdminService::Service {
 public:
  enum class Mode {
    kServe,          // the contract
    kWrongAck,       // acks sequence + 1
    kEndOkAfterOne,  // reads one message, ends the stream OK without an ack
    kNeverAck,       // reads every message, acks none; SaveTable waits for ReleaseSaves()
  };
  explicit FakeAdmin(Mode mode) : mode_(mode) {}

  grpc::Status UpdateRows(
      grpc::ServerContext* ctx,
      grpc::ServerReaderWriter<pb::UpdateRowsResponse, pb::UpdateRowsRequest>* stream) override {
    pb::UpdateRowsRequest request;
    grpc::Status status = grpc::Status::OK;
    while (stream->Read(&request)) {
      if (mode_ == Mode::kEndOkAfterOne) {
        break;
      }
      if (mode_ == Mode::kNeverAck) {
        continue;
      }
      if (status = Apply(request); !status.ok()) {
        break;
      }
      pb::UpdateRowsResponse ack;
      ack.set_table("t");
      ack.set_sequence(request.sequence() + (mode_ == Mode::kWrongAck ? 1 : 0));
      ack.set_rows(request.ids_size());
      if (!stream->Write(ack)) {
        break;
      }
    }
    {
      absl::MutexLock lock(&mu_);
      cancelled_ = ctx->IsCancelled();
      ++ended_;
    }
    return status;
  }

  // Saves the table as version 1, 2, ... (FAILED_PRECONDITION after set_has_versions(false)),
  // keeping its rows for SavedRows().
  grpc::Status SaveTable(grpc::ServerContext*, const pb::SaveTableRequest* request,
                         pb::SaveTableResponse* response) override {
    if (mode_ == Mode::kNeverAck) {
      release_saves_.WaitForNotification();
      return {grpc::StatusCode::UNAVAILABLE, "released"};
    }
    absl::MutexLock lock(&mu_);
    save_requests_.push_back(request->table());
    if (!request->table().empty() && request->table() != "t") {
      return {grpc::StatusCode::NOT_FOUND, absl::StrCat("no table '", request->table(), "'")};
    }
    if (!has_versions_) {
      return {grpc::StatusCode::FAILED_PRECONDITION,
              "table 't' was not loaded from a version directory"};
    }
    saved_.push_back(table_);
    saved_sequences_.push_back(last_sequence_);
    const int64_t version = static_cast<int64_t>(saved_.size());
    response->set_table("t");
    response->set_version(version);
    response->set_sequence(last_sequence_);
    response->set_path(absl::StrCat("/versions/t/", version, "/t.safetensors"));
    response->set_bytes(kRows * kDim * 4 + 128 + version);
    return grpc::Status::OK;
  }

  // Serves saved version `version` again (0: the newest saved, unpinned; any other pinned): its
  // rows and sequence replace the table's. FAILED_PRECONDITION for a version never saved (the
  // table stays), or after set_has_versions(false).
  grpc::Status LoadVersion(grpc::ServerContext*, const pb::LoadVersionRequest* request,
                           pb::LoadVersionResponse* response) override {
    if (mode_ == Mode::kNeverAck) {
      release_saves_.WaitForNotification();
      return {grpc::StatusCode::UNAVAILABLE, "released"};
    }
    absl::MutexLock lock(&mu_);
    load_requests_.emplace_back(request->table(), request->version());
    if (!request->table().empty() && request->table() != "t") {
      return {grpc::StatusCode::NOT_FOUND, absl::StrCat("no table '", request->table(), "'")};
    }
    if (!has_versions_) {
      return {grpc::StatusCode::FAILED_PRECONDITION,
              "table 't' was not loaded from a version directory"};
    }
    const int64_t version =
        request->version() == 0 ? static_cast<int64_t>(saved_.size()) : request->version();
    if (version < 1 || version > static_cast<int64_t>(saved_.size())) {
      return {grpc::StatusCode::FAILED_PRECONDITION,
              absl::StrCat("table 't' has no version ", request->version())};
    }
    table_ = saved_[version - 1];
    last_sequence_ = saved_sequences_[version - 1];
    response->set_table("t");
    response->set_version(version);
    response->set_sequence(last_sequence_);
    response->set_pinned(request->version() != 0);
    return grpc::Status::OK;
  }
  std::vector<std::pair<std::string, int64_t>> load_requests() {
    absl::MutexLock lock(&mu_);
    return load_requests_;
  }

  void set_has_versions(bool v) {
    absl::MutexLock lock(&mu_);
    has_versions_ = v;
  }
  // Lets every SaveTable of a kNeverAck fake return.
  void ReleaseSaves() { release_saves_.Notify(); }
  // The rows saved as `version` (1-based), row-major.
  std::vector<float> SavedRows(int64_t version) {
    absl::MutexLock lock(&mu_);
    return saved_.at(version - 1);
  }
  std::vector<std::string> save_requests() {
    absl::MutexLock lock(&mu_);
    return save_requests_;
  }

  // Row `id` of the table as it is now (0 where never written).
  std::vector<float> Row(int64_t id) {
    absl::MutexLock lock(&mu_);
    std::vector<float> row(kDim);
    std::memcpy(row.data(), table_.data() + id * kDim, sizeof(float) * kDim);
    return row;
  }
  std::vector<int64_t> applied() {
    absl::MutexLock lock(&mu_);
    return applied_;
  }
  // Waits until a stream's handler has returned; whether the last one's call was cancelled.
  bool WaitEnded() {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(
        +[](int* ended) { return *ended > 0; }, &ended_));
    return cancelled_;
  }

 private:
  grpc::Status Apply(const pb::UpdateRowsRequest& r) {
    absl::MutexLock lock(&mu_);
    if (!r.table().empty() && r.table() != "t") {
      return {grpc::StatusCode::NOT_FOUND, absl::StrCat("no table '", r.table(), "'")};
    }
    if (r.sequence() <= last_sequence_) {
      return {grpc::StatusCode::FAILED_PRECONDITION,
              absl::StrCat("sequence ", r.sequence(), " <= ", last_sequence_)};
    }
    for (int64_t id : r.ids()) {
      if (id < 0 || id >= kRows) {
        return {grpc::StatusCode::OUT_OF_RANGE, absl::StrCat("id ", id)};
      }
    }
    const DataType type = r.dtype() == pb::DATA_TYPE_UNSPECIFIED ? DataType::kFloat32
                                                                 : static_cast<DataType>(r.dtype());
    if (r.rows().size() != r.ids_size() * kDim * ElementSize(type)) {
      return {grpc::StatusCode::INVALID_ARGUMENT, "rows of the wrong length"};
    }
    for (int i = 0; i < r.ids_size(); ++i) {
      for (int64_t j = 0; j < kDim; ++j) {
        table_[r.ids(i) * kDim + j] = LoadAsFloat(r.rows().data(), type, i * kDim + j);
      }
    }
    last_sequence_ = r.sequence();
    applied_.push_back(r.sequence());
    return grpc::Status::OK;
  }

  const Mode mode_;
  absl::Mutex mu_;
  std::vector<float> table_ ABSL_GUARDED_BY(mu_) = std::vector<float>(kRows * kDim, 0.0f);
  int64_t last_sequence_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<int64_t> applied_ ABSL_GUARDED_BY(mu_);
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  bool has_versions_ ABSL_GUARDED_BY(mu_) = true;
  std::vector<std::vector<float>> saved_ ABSL_GUARDED_BY(mu_);   // version k at [k - 1]
  std::vector<std::string> save_requests_ ABSL_GUARDED_BY(mu_);  // their table fields
  std::vector<int64_t> saved_sequences_ ABSL_GUARDED_BY(mu_);    // beside saved_
  std::vector<std::pair<std::string, int64_t>> load_requests_ ABSL_GUARDED_BY(mu_);
  absl::Notification release_saves_;
  int ended_ ABSL_GUARDED_BY(mu_) = 0;  // streams whose handler has returned
};

// A fake EmbeddingService whose ListTables describes one updated table.
class FakeLookUp final : public pb::EmbeddingService::Service {
  grpc::Status ListTables(grpc::ServerContext*, const pb::ListTablesRequest*,
                          pb::ListTablesResponse* response) override {
    pb::TableInfo* t = response->add_tables();
    t->set_name("t");
    t->set_rows(kRows);
    t->set_dim(kDim);
    t->set_dtype(pb::DATA_TYPE_FLOAT16);
    t->set_device("cpu");
    t->set_is_default(true);
    t->set_sequence(int64_t{1} << 40);
    t->set_updated_rows(12345);
    t->set_version(int64_t{3} << 33);
    t->set_version_pinned(true);
    pb::TableInfo* other = response->add_tables();  // from a file: version 0
    other->set_name("u");
    other->set_rows(1);
    other->set_dim(1);
    other->set_dtype(pb::DATA_TYPE_FLOAT32);
    return grpc::Status::OK;
  }
};

// An in-process server with `service`, and a channel to it.
class InProcessServer {
 public:
  explicit InProcessServer(grpc::Service* service) {
    grpc::ServerBuilder builder;
    builder.RegisterService(service);
    server_ = builder.BuildAndStart();
    channel_ = server_->InProcessChannel(DefaultChannelArguments());
  }
  ~InProcessServer() { server_->Shutdown(); }
  std::shared_ptr<grpc::Channel> channel() const { return channel_; }

 private:
  std::unique_ptr<grpc::Server> server_;
  std::shared_ptr<grpc::Channel> channel_;
};

// `n` random rows of kDim floats, and `n` distinct random ids.
struct RandomUpdate {
  std::vector<int64_t> ids;
  std::vector<float> values;
};
RandomUpdate MakeRandom(std::mt19937_64& rng, int n) {
  RandomUpdate u;
  std::vector<int64_t> all(kRows);
  for (int64_t i = 0; i < kRows; ++i) {
    all[i] = i;
  }
  std::shuffle(all.begin(), all.end(), rng);
  u.ids.assign(all.begin(), all.begin() + n);
  std::normal_distribution<float> normal;
  for (int i = 0; i < n * kDim; ++i) {
    u.values.push_back(normal(rng));
  }
  return u;
}

RowUpdate ToRowUpdate(const RandomUpdate& u, int64_t sequence, std::string table = "") {
  RowUpdate r;
  r.table = std::move(table);
  r.ids = u.ids;
  r.rows = EncodeRows(u.values, DataType::kFloat32);
  r.dtype = DataType::kFloat32;
  r.sequence = sequence;
  return r;
}

void ExpectRowsApplied(FakeAdmin& fake, const RandomUpdate& u) {
  for (size_t i = 0; i < u.ids.size(); ++i) {
    const std::vector<float> row = fake.Row(u.ids[i]);
    for (int64_t j = 0; j < kDim; ++j) {
      ASSERT_EQ(row[j], u.values[i * kDim + j]) << "id " << u.ids[i] << " element " << j;
    }
  }
}

TEST(EncodeRows, EachTypeRoundsAsTheServerConverts) {
  std::mt19937_64 rng(1);
  std::normal_distribution<float> normal(0.0f, 100.0f);
  std::vector<float> values(1000);
  for (float& v : values) {
    v = normal(rng);
  }
  // Ties round to even: 1 + 2^-11 is halfway between two halves, 1 + 2^-8 between two bfloat16s.
  values.push_back(1.0f + 0x1p-11f);
  values.push_back(1.0f + 3 * 0x1p-11f);
  values.push_back(1.0f + 0x1p-8f);
  const std::string f32 = EncodeRows(values, DataType::kFloat32);
  const std::string f16 = EncodeRows(values, DataType::kFloat16);
  const std::string bf16 = EncodeRows(values, DataType::kBFloat16);
  ASSERT_EQ(f32.size(), values.size() * 4);
  ASSERT_EQ(f16.size(), values.size() * 2);
  ASSERT_EQ(bf16.size(), values.size() * 2);
  for (size_t i = 0; i < values.size(); ++i) {
    float f;
    uint16_t h, b;
    std::memcpy(&f, f32.data() + 4 * i, 4);
    std::memcpy(&h, f16.data() + 2 * i, 2);
    std::memcpy(&b, bf16.data() + 2 * i, 2);
    ASSERT_EQ(f, values[i]) << i;
    ASSERT_EQ(h, FloatToHalf(values[i])) << i;
    ASSERT_EQ(b, FloatToBFloat16(values[i])) << i;
  }
  const size_t n = values.size();
  uint16_t h;
  std::memcpy(&h, f16.data() + 2 * (n - 3), 2);
  EXPECT_EQ(HalfToFloat(h), 1.0f);
  std::memcpy(&h, f16.data() + 2 * (n - 2), 2);
  EXPECT_EQ(HalfToFloat(h), 1.0f + 4 * 0x1p-11f);
  std::memcpy(&h, bf16.data() + 2 * (n - 1), 2);
  EXPECT_EQ(BFloat16ToFloat(h), 1.0f);
}

TEST(ToUpdateRowsRequest, CopiesEveryField) {
  RowUpdate u;
  u.table = "items";
  u.ids = {3, 1, 4};
  u.rows = std::string("\x01\x02\x03\x04\x05\x06", 6);
  u.dtype = DataType::kBFloat16;
  u.sequence = 77;
  pb::UpdateRowsRequest r;
  r.set_table("stale");
  r.add_ids(9);
  ToUpdateRowsRequest(u, &r);
  EXPECT_EQ(r.table(), "items");
  EXPECT_THAT(r.ids(), ElementsAre(3, 1, 4));
  EXPECT_EQ(r.rows(), u.rows);
  EXPECT_EQ(r.dtype(), pb::DATA_TYPE_BFLOAT16);
  EXPECT_EQ(r.sequence(), 77);
  u.dtype.reset();
  ToUpdateRowsRequest(u, &r);
  EXPECT_EQ(r.dtype(), pb::DATA_TYPE_UNSPECIFIED);
}

TEST(AdminClient, UpdateRowsReturnsTheAckAndTheRowsArrive) {
  FakeAdmin fake(FakeAdmin::Mode::kServe);
  InProcessServer server(&fake);
  AdminClient client(server.channel());
  std::mt19937_64 rng(2);
  const RandomUpdate u = MakeRandom(rng, 17);
  absl::StatusOr<UpdateAck> ack = client.UpdateRows(ToRowUpdate(u, 5), kTimeout);
  ASSERT_THAT(ack, IsOk());
  EXPECT_EQ(ack->table, "t");
  EXPECT_EQ(ack->sequence, 5);
  EXPECT_EQ(ack->rows, 17);
  ExpectRowsApplied(fake, u);
  // In float16 and bfloat16 too: the fake widens what arrives, which must be the rounded values.
  RandomUpdate half = MakeRandom(rng, 9);
  RowUpdate r = ToRowUpdate(half, 6);
  r.dtype = DataType::kFloat16;
  r.rows = EncodeRows(half.values, DataType::kFloat16);
  ASSERT_THAT(client.UpdateRows(r, kTimeout), IsOk());
  for (float& v : half.values) {
    v = HalfToFloat(FloatToHalf(v));
  }
  ExpectRowsApplied(fake, half);
}

TEST(AdminClient, UpdateRowsReturnsTheServersStatus) {
  FakeAdmin fake(FakeAdmin::Mode::kServe);
  InProcessServer server(&fake);
  AdminClient client(server.channel());
  std::mt19937_64 rng(3);
  EXPECT_THAT(client.UpdateRows(ToRowUpdate(MakeRandom(rng, 2), 1, "nope"), kTimeout),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("no table 'nope'")));
  RowUpdate bad = ToRowUpdate(MakeRandom(rng, 2), 1);
  bad.ids[1] = kRows;
  EXPECT_THAT(client.UpdateRows(bad, kTimeout), StatusIs(absl::StatusCode::kOutOfRange));
  EXPECT_THAT(fake.applied(), ::testing::IsEmpty());
}

TEST(AdminClient, RejectsTimeoutsThatAreNotPositiveAndFinite) {
  FakeAdmin fake(FakeAdmin::Mode::kServe);
  InProcessServer server(&fake);
  AdminClient client(server.channel());
  for (absl::Duration t : {absl::ZeroDuration(), absl::Seconds(-1), absl::InfiniteDuration()}) {
    EXPECT_THAT(client.OpenWriter(t), StatusIs(absl::StatusCode::kInvalidArgument))
        << absl::FormatDuration(t);
    EXPECT_THAT(client.UpdateRows(RowUpdate(), t), StatusIs(absl::StatusCode::kInvalidArgument));
  }
  EXPECT_THAT(client.OpenWriter(kTimeout, 0), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(fake.applied(), ::testing::IsEmpty());
}

// Many messages in flight through a window of 8: every ack comes back, in order, and every row
// is the last one written to it.
TEST(RowWriter, PipelinedSendsAreAcknowledgedInOrder) {
  FakeAdmin fake(FakeAdmin::Mode::kServe);
  InProcessServer server(&fake);
  AdminClient client(server.channel());
  absl::StatusOr<std::unique_ptr<RowWriter>> writer = client.OpenWriter(kTimeout, 8);
  ASSERT_THAT(writer, IsOk());
  std::mt19937_64 rng(4);
  std::map<int64_t, std::vector<float>> expected;
  constexpr int kMessages = 500;
  for (int64_t seq = 1; seq <= kMessages; ++seq) {
    const RandomUpdate u = MakeRandom(rng, 1 + static_cast<int>(seq % 7));
    ASSERT_THAT((*writer)->Send(ToRowUpdate(u, 10 * seq)), IsOk()) << seq;
    for (size_t i = 0; i < u.ids.size(); ++i) {
      expected[u.ids[i]].assign(u.values.begin() + i * kDim, u.values.begin() + (i + 1) * kDim);
    }
  }
  EXPECT_EQ((*writer)->unacknowledged(), kMessages);
  for (int64_t seq = 1; seq <= kMessages; ++seq) {
    absl::StatusOr<UpdateAck> ack = (*writer)->NextAck();
    ASSERT_THAT(ack, IsOk()) << seq;
    EXPECT_EQ(ack->sequence, 10 * seq);
    EXPECT_EQ(ack->rows, 1 + seq % 7);
    EXPECT_EQ(ack->table, "t");
  }
  EXPECT_EQ((*writer)->unacknowledged(), 0);
  EXPECT_THAT((*writer)->NextAck(), StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT((*writer)->Finish(), IsOk());
  EXPECT_THAT((*writer)->Finish(), IsOk());
  EXPECT_THAT((*writer)->Send(RowUpdate()), StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_EQ(fake.applied().size(), kMessages);
  for (const auto& [id, row] : expected) {
    EXPECT_EQ(fake.Row(id), row) << "id " << id;
  }
}

// Finish waits for the acks still outstanding and keeps them for NextAck.
TEST(RowWriter, FinishCollectsOutstandingAcks) {
  FakeAdmin fake(FakeAdmin::Mode::kServe);
  InProcessServer server(&fake);
  AdminClient client(server.channel());
  absl::StatusOr<std::unique_ptr<RowWriter>> writer = client.OpenWriter(kTimeout);
  ASSERT_THAT(writer, IsOk());
  std::mt19937_64 rng(5);
  for (int64_t seq = 1; seq <= 3; ++seq) {
    ASSERT_THAT((*writer)->Send(ToRowUpdate(MakeRandom(rng, 2), seq)), IsOk());
  }
  ASSERT_THAT((*writer)->Finish(), IsOk());
  for (int64_t seq = 1; seq <= 3; ++seq) {
    absl::StatusOr<UpdateAck> ack = (*writer)->NextAck();
    ASSERT_THAT(ack, IsOk());
    EXPECT_EQ(ack->sequence, seq);
  }
  EXPECT_THAT(fake.applied(), ElementsAre(1, 2, 3));
}

// The first bad message ends the stream: the acks before it still arrive, then its status, from
// NextAck, Send and Finish alike; nothing after it is applied.
TEST(RowWriter, FirstBadMessageEndsTheStreamAfterTheEarlierAcks) {
  FakeAdmin fake(FakeAdmin::Mode::kServe);
  InProcessServer server(&fake);
  AdminClient client(server.channel());
  absl::StatusOr<std::unique_ptr<RowWriter>> writer = client.OpenWriter(kTimeout);
  ASSERT_THAT(writer, IsOk());
  std::mt19937_64 rng(6);
  std::vector<RandomUpdate> good;
  for (int64_t seq = 1; seq <= 4; ++seq) {
    good.push_back(MakeRandom(rng, 3));
    ASSERT_THAT((*writer)->Send(ToRowUpdate(good.back(), seq)), IsOk());
  }
  ASSERT_THAT((*writer)->Send(ToRowUpdate(MakeRandom(rng, 3), 4)), IsOk());  // not increasing
  // Sent before or after the server has ended the stream: OK, or its status.
  for (int64_t seq = 5; seq <= 6; ++seq) {
    const absl::Status s = (*writer)->Send(ToRowUpdate(MakeRandom(rng, 3), seq));
    if (!s.ok()) {
      EXPECT_THAT(s, StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("sequence 4")));
    }
  }
  for (int64_t seq = 1; seq <= 4; ++seq) {
    absl::StatusOr<UpdateAck> ack = (*writer)->NextAck();
    ASSERT_THAT(ack, IsOk());
    EXPECT_EQ(ack->sequence, seq);
  }
  EXPECT_THAT((*writer)->NextAck(),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("sequence 4 <= 4")));
  EXPECT_THAT((*writer)->Send(ToRowUpdate(MakeRandom(rng, 3), 9)),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("sequence 4 <= 4")));
  EXPECT_THAT((*writer)->Finish(),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("sequence 4 <= 4")));
  EXPECT_THAT(fake.applied(), ElementsAre(1, 2, 3, 4));
  std::map<int64_t, std::vector<float>> expected;  // the last write of each id
  for (const RandomUpdate& u : good) {
    for (size_t i = 0; i < u.ids.size(); ++i) {
      expected[u.ids[i]].assign(u.values.begin() + i * kDim, u.values.begin() + (i + 1) * kDim);
    }
  }
  for (const auto& [id, row] : expected) {
    EXPECT_EQ(fake.Row(id), row) << "id " << id;
  }
}

TEST(RowWriter, WriteWantsNoOutstandingAck) {
  FakeAdmin fake(FakeAdmin::Mode::kServe);
  InProcessServer server(&fake);
  AdminClient client(server.channel());
  absl::StatusOr<std::unique_ptr<RowWriter>> writer = client.OpenWriter(kTimeout);
  ASSERT_THAT(writer, IsOk());
  std::mt19937_64 rng(7);
  absl::StatusOr<UpdateAck> first = (*writer)->Write(ToRowUpdate(MakeRandom(rng, 1), 1));
  ASSERT_THAT(first, IsOk());
  EXPECT_EQ(first->sequence, 1);
  ASSERT_THAT((*writer)->Send(ToRowUpdate(MakeRandom(rng, 1), 2)), IsOk());
  EXPECT_THAT((*writer)->Write(ToRowUpdate(MakeRandom(rng, 1), 3)),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("1 acks outstanding")));
  ASSERT_THAT((*writer)->NextAck(), IsOk());
  ASSERT_THAT((*writer)->Finish(), IsOk());
  EXPECT_THAT(fake.applied(), ElementsAre(1, 2));  // 3 was never sent
}

TEST(RowWriter, AnAckOfAnotherSequenceIsInternal) {
  FakeAdmin fake(FakeAdmin::Mode::kWrongAck);
  InProcessServer server(&fake);
  AdminClient client(server.channel());
  std::mt19937_64 rng(8);
  EXPECT_THAT(client.UpdateRows(ToRowUpdate(MakeRandom(rng, 1), 3), kTimeout),
              StatusIs(absl::StatusCode::kInternal,
                       HasSubstr("acknowledged sequence 4 where the oldest message in flight has "
                                 "sequence 3")));
  EXPECT_TRUE(fake.WaitEnded());  // the client cancelled the stream
}

TEST(RowWriter, AnOkEndWithMessagesUnacknowledgedIsInternal) {
  FakeAdmin fake(FakeAdmin::Mode::kEndOkAfterOne);
  InProcessServer server(&fake);
  AdminClient client(server.channel());
  std::mt19937_64 rng(9);
  EXPECT_THAT(client.UpdateRows(ToRowUpdate(MakeRandom(rng, 1), 3), kTimeout),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("1 messages unacknowledged")));
}

TEST(RowWriter, TheTimeoutIsTheStreamsDeadline) {
  FakeAdmin fake(FakeAdmin::Mode::kNeverAck);
  InProcessServer server(&fake);
  AdminClient client(server.channel());
  std::mt19937_64 rng(10);
  const absl::Time start = absl::Now();
  EXPECT_THAT(client.UpdateRows(ToRowUpdate(MakeRandom(rng, 1), 1), absl::Milliseconds(300)),
              StatusIs(absl::StatusCode::kDeadlineExceeded));
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(290));
  EXPECT_TRUE(fake.WaitEnded());
}

TEST(RowWriter, DestroyingAnUnfinishedWriterCancelsItsStream) {
  FakeAdmin fake(FakeAdmin::Mode::kNeverAck);
  InProcessServer server(&fake);
  AdminClient client(server.channel());
  std::mt19937_64 rng(11);
  {
    absl::StatusOr<std::unique_ptr<RowWriter>> writer = client.OpenWriter(kTimeout);
    ASSERT_THAT(writer, IsOk());
    ASSERT_THAT((*writer)->Send(ToRowUpdate(MakeRandom(rng, 1), 1)), IsOk());
  }
  EXPECT_TRUE(fake.WaitEnded());
}

// One thread sends while another reads the acks: every ack, in order.
TEST(RowWriter, OneThreadSendsAnotherReadsTheAcks) {
  FakeAdmin fake(FakeAdmin::Mode::kServe);
  InProcessServer server(&fake);
  AdminClient client(server.channel());
  absl::StatusOr<std::unique_ptr<RowWriter>> writer = client.OpenWriter(kTimeout, 4);
  ASSERT_THAT(writer, IsOk());
  constexpr int64_t kMessages = 300;
  absl::Mutex mu;
  int64_t sent_count = 0;  // NextAck wants a message sent before it
  std::vector<int64_t> acked;
  std::thread reader([&] {
    for (int64_t i = 0; i < kMessages; ++i) {
      {
        absl::MutexLock lock(&mu);
        auto sent = [&]() { return sent_count > i; };
        mu.Await(absl::Condition(&sent));
      }
      absl::StatusOr<UpdateAck> ack = (*writer)->NextAck();
      if (!ack.ok()) {
        ADD_FAILURE() << ack.status();
        return;
      }
      acked.push_back(ack->sequence);
    }
  });
  std::mt19937_64 rng(12);
  std::vector<int64_t> sent;
  for (int64_t seq = 1; seq <= kMessages; ++seq) {
    if (absl::Status s = (*writer)->Send(ToRowUpdate(MakeRandom(rng, 2), seq)); !s.ok()) {
      ADD_FAILURE() << "Send " << seq << ": " << s;
      absl::MutexLock lock(&mu);
      sent_count = kMessages;  // the reader's NextAck fails and it returns
      break;
    }
    sent.push_back(seq);
    absl::MutexLock lock(&mu);
    ++sent_count;
  }
  reader.join();
  EXPECT_EQ(acked, sent);
  EXPECT_THAT((*writer)->Finish(), IsOk());
}

// Send waits while `max_unacked` messages are unacknowledged: with a server that acks nothing,
// the fourth of a window of three waits until the stream's deadline ends it.
TEST(RowWriter, SendWaitsForRoomInTheWindow) {
  FakeAdmin fake(FakeAdmin::Mode::kNeverAck);
  InProcessServer server(&fake);
  AdminClient client(server.channel());
  absl::StatusOr<std::unique_ptr<RowWriter>> writer = client.OpenWriter(absl::Milliseconds(500), 3);
  ASSERT_THAT(writer, IsOk());
  std::mt19937_64 rng(13);
  for (int64_t seq = 1; seq <= 3; ++seq) {
    ASSERT_THAT((*writer)->Send(ToRowUpdate(MakeRandom(rng, 1), seq)), IsOk());
  }
  EXPECT_THAT((*writer)->Send(ToRowUpdate(MakeRandom(rng, 1), 4)),
              StatusIs(absl::StatusCode::kDeadlineExceeded));
  EXPECT_EQ((*writer)->unacknowledged(), 3);
  EXPECT_THAT((*writer)->NextAck(), StatusIs(absl::StatusCode::kDeadlineExceeded));
  EXPECT_THAT((*writer)->Finish(), StatusIs(absl::StatusCode::kDeadlineExceeded));
}

TEST(EmbeddingClient, ListTablesReportsSequenceUpdatedRowsAndVersion) {
  FakeLookUp fake;
  InProcessServer server(&fake);
  EmbeddingClient client(server.channel());
  absl::StatusOr<std::vector<TableInfo>> tables = client.ListTables(kTimeout);
  ASSERT_THAT(tables, IsOk());
  ASSERT_EQ(tables->size(), 2u);
  const TableInfo& t = tables->front();
  EXPECT_EQ(t.name, "t");
  EXPECT_EQ(t.dtype, DataType::kFloat16);
  EXPECT_TRUE(t.is_default);
  EXPECT_EQ(t.sequence, int64_t{1} << 40);
  EXPECT_EQ(t.updated_rows, 12345);
  EXPECT_EQ(t.version, int64_t{3} << 33);
  EXPECT_TRUE(t.version_pinned);
  EXPECT_EQ((*tables)[1].name, "u");
  EXPECT_EQ((*tables)[1].version, 0);
  EXPECT_FALSE((*tables)[1].version_pinned);
  EXPECT_EQ((*tables)[1].sequence, 0);
}

// A server without the admin service (an embedding-server's lookup port) answers UNIMPLEMENTED
// with no text; every call says what that means (issue 40).
TEST(AdminClient, AnAddressWithoutTheAdminServiceIsNamedAsSuch) {
  FakeLookUp fake;
  InProcessServer server(&fake);
  AdminClient admin(server.channel());
  const auto says_no_admin_service =
      StatusIs(absl::StatusCode::kUnimplemented,
               AllOf(HasSubstr("this address serves no admin service"),
                     HasSubstr("only on the port of its --admin_address")));
  std::mt19937_64 rng(5);
  EXPECT_THAT(admin.UpdateRows(ToRowUpdate(MakeRandom(rng, 2), 1), kTimeout).status(),
              says_no_admin_service);
  EXPECT_THAT(admin.SaveTable("", kTimeout).status(), says_no_admin_service);
  EXPECT_THAT(admin.LoadVersion("", 0, kTimeout).status(), says_no_admin_service);
}

// Each save returns every field of the server's answer; the version holds the updates acked
// before it, and the sequence is the last of them.
TEST(AdminClient, SaveTableReturnsTheVersionWritten) {
  FakeAdmin fake(FakeAdmin::Mode::kServe);
  InProcessServer server(&fake);
  AdminClient client(server.channel());
  std::mt19937_64 rng(14);
  const RandomUpdate u = MakeRandom(rng, 20);
  ASSERT_THAT(client.UpdateRows(ToRowUpdate(u, 41), kTimeout), IsOk());
  absl::StatusOr<SavedVersion> first = client.SaveTable("", kTimeout);
  ASSERT_THAT(first, IsOk());
  EXPECT_EQ(first->table, "t");  // named, though the request left it empty
  EXPECT_EQ(first->version, 1);
  EXPECT_EQ(first->sequence, 41);
  EXPECT_EQ(first->path, "/versions/t/1/t.safetensors");
  EXPECT_EQ(first->bytes, kRows * kDim * 4 + 129);
  const RandomUpdate v = MakeRandom(rng, 5);
  ASSERT_THAT(client.UpdateRows(ToRowUpdate(v, 50), kTimeout), IsOk());
  absl::StatusOr<SavedVersion> second = client.SaveTable("t", kTimeout);
  ASSERT_THAT(second, IsOk());
  EXPECT_EQ(second->table, "t");
  EXPECT_EQ(second->version, 2);
  EXPECT_EQ(second->sequence, 50);
  EXPECT_EQ(second->path, "/versions/t/2/t.safetensors");
  EXPECT_EQ(second->bytes, kRows * kDim * 4 + 130);
  EXPECT_THAT(fake.save_requests(), ElementsAre("", "t"));
  // Version 1 holds u and not v; version 2 both.
  std::vector<float> model(kRows * kDim, 0.0f);
  for (size_t i = 0; i < u.ids.size(); ++i) {
    std::copy_n(u.values.begin() + i * kDim, kDim, model.begin() + u.ids[i] * kDim);
  }
  EXPECT_EQ(fake.SavedRows(1), model);
  for (size_t i = 0; i < v.ids.size(); ++i) {
    std::copy_n(v.values.begin() + i * kDim, kDim, model.begin() + v.ids[i] * kDim);
  }
  EXPECT_EQ(fake.SavedRows(2), model);
}

TEST(AdminClient, SaveTableReturnsTheServersStatus) {
  FakeAdmin fake(FakeAdmin::Mode::kServe);
  InProcessServer server(&fake);
  AdminClient client(server.channel());
  EXPECT_THAT(client.SaveTable("nope", kTimeout),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("no table 'nope'")));
  fake.set_has_versions(false);
  EXPECT_THAT(client.SaveTable("t", kTimeout),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("version directory")));
  for (absl::Duration t : {absl::ZeroDuration(), absl::Seconds(-1), absl::InfiniteDuration()}) {
    EXPECT_THAT(client.SaveTable("t", t), StatusIs(absl::StatusCode::kInvalidArgument))
        << absl::FormatDuration(t);
  }
  EXPECT_THAT(fake.save_requests(), ElementsAre("nope", "t"));  // the bad timeouts sent nothing
}

TEST(AdminClient, SaveTableTimeoutIsTheCallsDeadline) {
  FakeAdmin fake(FakeAdmin::Mode::kNeverAck);
  InProcessServer server(&fake);
  AdminClient client(server.channel());
  const absl::Time start = absl::Now();
  EXPECT_THAT(client.SaveTable("t", absl::Milliseconds(300)),
              StatusIs(absl::StatusCode::kDeadlineExceeded));
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(290));
  fake.ReleaseSaves();  // before the server shuts down, which waits for the handler
}

// LoadVersion returns every field of the server's answer: a given version is served (its rows and
// sequence) and pinned; 0 serves the newest and unpins.
TEST(AdminClient, LoadVersionServesAndPinsTheVersion) {
  FakeAdmin fake(FakeAdmin::Mode::kServe);
  InProcessServer server(&fake);
  AdminClient client(server.channel());
  std::mt19937_64 rng(15);
  const RandomUpdate u = MakeRandom(rng, 20);
  ASSERT_THAT(client.UpdateRows(ToRowUpdate(u, 7), kTimeout), IsOk());
  ASSERT_THAT(client.SaveTable("t", kTimeout), IsOk());  // version 1: u, sequence 7
  const RandomUpdate v = MakeRandom(rng, 30);
  ASSERT_THAT(client.UpdateRows(ToRowUpdate(v, int64_t{1} << 35), kTimeout), IsOk());
  ASSERT_THAT(client.SaveTable("t", kTimeout), IsOk());  // version 2: u and v

  absl::StatusOr<LoadedVersion> rollback = client.LoadVersion("", 1, kTimeout);
  ASSERT_THAT(rollback, IsOk());
  EXPECT_EQ(rollback->table, "t");  // named, though the request left it empty
  EXPECT_EQ(rollback->version, 1);
  EXPECT_EQ(rollback->sequence, 7);
  EXPECT_TRUE(rollback->pinned);
  const std::vector<float> version1 = fake.SavedRows(1);
  for (int64_t id = 0; id < kRows; ++id) {  // the table is version 1's again
    EXPECT_EQ(fake.Row(id),
              std::vector<float>(version1.begin() + id * kDim, version1.begin() + (id + 1) * kDim))
        << id;
  }
  absl::StatusOr<LoadedVersion> newest = client.LoadVersion("t", 0, kTimeout);
  ASSERT_THAT(newest, IsOk());
  EXPECT_EQ(newest->table, "t");
  EXPECT_EQ(newest->version, 2);
  EXPECT_EQ(newest->sequence, int64_t{1} << 35);
  EXPECT_FALSE(newest->pinned);
  absl::StatusOr<LoadedVersion> pinned_newest = client.LoadVersion("t", 2, kTimeout);
  ASSERT_THAT(pinned_newest, IsOk());
  EXPECT_EQ(pinned_newest->version, 2);
  EXPECT_TRUE(pinned_newest->pinned);
  EXPECT_THAT(fake.load_requests(), ElementsAre(std::pair<std::string, int64_t>("", 1),
                                                std::pair<std::string, int64_t>("t", 0),
                                                std::pair<std::string, int64_t>("t", 2)));
}

TEST(AdminClient, LoadVersionReturnsTheServersStatus) {
  FakeAdmin fake(FakeAdmin::Mode::kServe);
  InProcessServer server(&fake);
  AdminClient client(server.channel());
  ASSERT_THAT(client.SaveTable("t", kTimeout), IsOk());
  EXPECT_THAT(client.LoadVersion("nope", 1, kTimeout),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("no table 'nope'")));
  EXPECT_THAT(client.LoadVersion("t", int64_t{1} << 40, kTimeout),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("no version")));
  fake.set_has_versions(false);
  EXPECT_THAT(client.LoadVersion("t", 0, kTimeout),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("version directory")));
  for (absl::Duration t : {absl::ZeroDuration(), absl::Seconds(-1), absl::InfiniteDuration()}) {
    EXPECT_THAT(client.LoadVersion("t", 1, t), StatusIs(absl::StatusCode::kInvalidArgument))
        << absl::FormatDuration(t);
  }
  EXPECT_THAT(client.LoadVersion("t", -1, kTimeout),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("-1")));
  // The bad timeouts and the negative version sent nothing.
  EXPECT_THAT(fake.load_requests(),
              ElementsAre(std::pair<std::string, int64_t>("nope", 1),
                          std::pair<std::string, int64_t>("t", int64_t{1} << 40),
                          std::pair<std::string, int64_t>("t", 0)));
}

TEST(AdminClient, LoadVersionTimeoutIsTheCallsDeadline) {
  FakeAdmin fake(FakeAdmin::Mode::kNeverAck);
  InProcessServer server(&fake);
  AdminClient client(server.channel());
  const absl::Time start = absl::Now();
  EXPECT_THAT(client.LoadVersion("t", 1, absl::Milliseconds(300)),
              StatusIs(absl::StatusCode::kDeadlineExceeded));
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(290));
  fake.ReleaseSaves();  // before the server shuts down, which waits for the handler
}

}  // namespace
}  // namespace emb::client::admin_client_test
