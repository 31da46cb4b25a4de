// AdminClient and RowWriter against the real embedding-server binary (admin listener on
// loopback): random rows sent in every type are read back by LookUp and compared element by
// element with a model of the table (the demo table's rows, overwritten by each acknowledged
// update, last write winning); a refused message ends the stream after the earlier acks;
// ListTables reports the sequence and the rows written; mutual TLS with the client's TlsOptions.
// SaveTable on a table from a version directory (DIR/1/t.npy): the version it returns is on disk
// and is what a restarted server serves, row by row, with its version and sequence; after it, the
// sequence goes on from the saved one. The server's own guarantees are
// tests/integration/update_rows_test.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "client/admin_client.h"
#include "client/embedding_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/data_type.h"
#include "tests/testing/cert_dir.h"
#include "tests/testing/demo_table.h"
#include "tests/testing/server_process.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/table_files.h"

namespace emb::client {
namespace {

using ::emb::testing::IsOk;
using ::emb::testing::ServerProcess;
using ::emb::testing::StatusIs;
using ::testing::HasSubstr;

constexpr int64_t kRows = 1000;
constexpr int64_t kDim = 16;
constexpr uint64_t kSeed = 7;
constexpr absl::Duration kTimeout = absl::Seconds(30);
constexpr DataType kTypes[] = {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16};

// The demo table as the server should now serve it, in float32 (the table's type).
class TableModel {
 public:
  TableModel() : values_(kRows * kDim) {
    const testing::DemoTable demo(kRows, kDim, kSeed);
    std::vector<int64_t> all(kRows);
    for (int64_t i = 0; i < kRows; ++i) {
      all[i] = i;
    }
    const std::string bytes = demo.Rows(all);
    std::memcpy(values_.data(), bytes.data(), bytes.size());
  }
  // kRows x kDim float32 values, row-major.
  explicit TableModel(std::vector<float> values) : values_(std::move(values)) {}

  // Applies `update` as the server does: each row converted from its type to float32.
  void Apply(const RowUpdate& update) {
    const DataType type = update.dtype.value_or(DataType::kFloat32);
    for (size_t i = 0; i < update.ids.size(); ++i) {
      for (int64_t j = 0; j < kDim; ++j) {
        values_[update.ids[i] * kDim + j] =
            LoadAsFloat(update.rows.data(), type, static_cast<int64_t>(i) * kDim + j);
      }
    }
  }

  // Every row, looked up through `client`, equals the model's, element by element.
  void ExpectServed(EmbeddingClient& client) const {
    std::vector<int64_t> ids(kRows);
    for (int64_t i = 0; i < kRows; ++i) {
      ids[i] = i;
    }
    absl::StatusOr<LookUpResult> result = client.LookUp("", ids, {}, DataType::kFloat32, kTimeout);
    ASSERT_THAT(result, IsOk());
    const std::vector<float> got = result->ToFloat32();
    ASSERT_EQ(got.size(), values_.size());
    int differences = 0;
    for (size_t k = 0; k < got.size(); ++k) {
      if (got[k] != values_[k] && ++differences <= 5) {
        ADD_FAILURE() << "row " << k / kDim << " element " << k % kDim << ": served " << got[k]
                      << ", expected " << values_[k];
      }
    }
    EXPECT_EQ(differences, 0);
  }

 private:
  std::vector<float> values_;
};

// `n` distinct random ids with random rows, sent in `type`.
RowUpdate RandomUpdate(std::mt19937_64& rng, int n, DataType type, int64_t sequence) {
  std::vector<int64_t> all(kRows);
  for (int64_t i = 0; i < kRows; ++i) {
    all[i] = i;
  }
  std::shuffle(all.begin(), all.end(), rng);
  std::normal_distribution<float> normal(0.0f, 10.0f);
  std::vector<float> values(static_cast<size_t>(n) * kDim);
  for (float& v : values) {
    v = normal(rng);
  }
  RowUpdate u;
  u.ids.assign(all.begin(), all.begin() + n);
  u.rows = EncodeRows(values, type);
  u.dtype = type;
  u.sequence = sequence;
  return u;
}

class AdminClientServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto server =
        ServerProcess::Start({"--demo_table=" + std::to_string(kRows) + "x" + std::to_string(kDim),
                              "--demo_seed=" + std::to_string(kSeed), "--admin_address=127.0.0.1:0",
                              "--admin_insecure", "--drain_seconds=0"});
    ASSERT_THAT(server, IsOk());
    server_ = *std::move(server);
    ASSERT_NE(server_->admin_port(), 0) << server_->log();
    admin_ = AdminClient::Connect(server_->admin_target());
    lookup_ = EmbeddingClient::Connect(server_->target());
  }

  TableInfo Table() {
    absl::StatusOr<std::vector<TableInfo>> tables = lookup_->ListTables(kTimeout);
    EXPECT_THAT(tables, IsOk());
    return tables.ok() && !tables->empty() ? tables->front() : TableInfo();
  }

  std::unique_ptr<ServerProcess> server_;
  std::unique_ptr<AdminClient> admin_;
  std::unique_ptr<EmbeddingClient> lookup_;
  TableModel model_;
};

TEST_F(AdminClientServerTest, UpdatesInEveryTypeAreServedElementByElement) {
  std::mt19937_64 rng(1);
  EXPECT_EQ(Table().sequence, 0);
  int64_t sequence = 0;
  int64_t written = 0;
  for (DataType type : kTypes) {
    const RowUpdate u = RandomUpdate(rng, 50, type, sequence += 3);
    absl::StatusOr<UpdateAck> ack = admin_->UpdateRows(u, kTimeout);
    ASSERT_THAT(ack, IsOk()) << DataTypeName(type);
    EXPECT_EQ(ack->table, "demo");
    EXPECT_EQ(ack->sequence, sequence);
    EXPECT_EQ(ack->rows, 50);
    written += ack->rows;
    model_.Apply(u);
    // The ack means the rows are visible: no waiting before the lookup.
    model_.ExpectServed(*lookup_);
  }
  const TableInfo t = Table();
  EXPECT_EQ(t.sequence, sequence);
  EXPECT_EQ(t.updated_rows, written);
}

// Many messages in flight on one stream, through a small window: every ack in order, and the
// table ends as the last write of each row left it.
TEST_F(AdminClientServerTest, PipelinedWriterAppliesEveryMessageInOrder) {
  absl::StatusOr<std::unique_ptr<RowWriter>> writer = admin_->OpenWriter(kTimeout, 16);
  ASSERT_THAT(writer, IsOk());
  std::mt19937_64 rng(2);
  constexpr int kMessages = 200;
  std::vector<RowUpdate> sent;
  for (int k = 1; k <= kMessages; ++k) {
    sent.push_back(RandomUpdate(rng, 1 + k % 13, kTypes[k % 3], 5 * k));
    ASSERT_THAT((*writer)->Send(sent.back()), IsOk()) << k;
  }
  int64_t written = 0;
  for (const RowUpdate& u : sent) {
    absl::StatusOr<UpdateAck> ack = (*writer)->NextAck();
    ASSERT_THAT(ack, IsOk());
    EXPECT_EQ(ack->sequence, u.sequence);
    EXPECT_EQ(ack->rows, static_cast<int64_t>(u.ids.size()));
    written += ack->rows;
    model_.Apply(u);
  }
  ASSERT_THAT((*writer)->Finish(), IsOk());
  model_.ExpectServed(*lookup_);
  const TableInfo t = Table();
  EXPECT_EQ(t.sequence, 5 * kMessages);
  EXPECT_EQ(t.updated_rows, written);
}

// A refused message ends the stream: the acks before it arrive, then the server's status, and
// neither it nor anything after it is applied.
TEST_F(AdminClientServerTest, RefusedMessageEndsTheStreamAfterTheEarlierAcks) {
  absl::StatusOr<std::unique_ptr<RowWriter>> writer = admin_->OpenWriter(kTimeout);
  ASSERT_THAT(writer, IsOk());
  std::mt19937_64 rng(3);
  const RowUpdate first = RandomUpdate(rng, 20, DataType::kFloat32, 1);
  const RowUpdate second = RandomUpdate(rng, 20, DataType::kFloat16, 2);
  RowUpdate bad = RandomUpdate(rng, 20, DataType::kFloat32, 3);
  bad.ids[7] = kRows;
  ASSERT_THAT((*writer)->Send(first), IsOk());
  ASSERT_THAT((*writer)->Send(second), IsOk());
  ASSERT_THAT((*writer)->Send(bad), IsOk());
  const absl::Status after = (*writer)->Send(RandomUpdate(rng, 20, DataType::kFloat32, 4));
  if (!after.ok()) {  // the stream may have ended already
    EXPECT_THAT(after, StatusIs(absl::StatusCode::kOutOfRange));
  }
  absl::StatusOr<UpdateAck> ack = (*writer)->NextAck();
  ASSERT_THAT(ack, IsOk());
  EXPECT_EQ(ack->sequence, 1);
  ack = (*writer)->NextAck();
  ASSERT_THAT(ack, IsOk());
  EXPECT_EQ(ack->sequence, 2);
  EXPECT_THAT((*writer)->NextAck(),
              StatusIs(absl::StatusCode::kOutOfRange, HasSubstr(std::to_string(kRows))));
  EXPECT_THAT((*writer)->Finish(), StatusIs(absl::StatusCode::kOutOfRange));
  model_.Apply(first);
  model_.Apply(second);
  model_.ExpectServed(*lookup_);
  EXPECT_EQ(Table().sequence, 2);
  // A sequence that does not increase, on a new stream.
  EXPECT_THAT(admin_->UpdateRows(RandomUpdate(rng, 1, DataType::kFloat32, 2), kTimeout),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  RowUpdate elsewhere = RandomUpdate(rng, 1, DataType::kFloat32, 3);
  elsewhere.table = "nope";
  EXPECT_THAT(admin_->UpdateRows(elsewhere, kTimeout),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("nope")));
  model_.ExpectServed(*lookup_);
}

// The demo table is not from a version directory: nothing to save it to.
TEST_F(AdminClientServerTest, SaveTableWantsATableFromAVersionDirectory) {
  EXPECT_THAT(admin_->SaveTable("", kTimeout), StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(admin_->SaveTable("nope", kTimeout),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("nope")));
  EXPECT_EQ(Table().version, 0);
}

TEST_F(AdminClientServerTest, TheLookUpPortHasNoAdminService) {
  std::mt19937_64 rng(4);
  AdminClient wrong(CreateInsecureChannel(server_->target()));
  EXPECT_THAT(wrong.UpdateRows(RandomUpdate(rng, 1, DataType::kFloat32, 1), kTimeout),
              StatusIs(absl::StatusCode::kUnimplemented));
  EXPECT_EQ(Table().sequence, 0);
}

// The admin listener under mutual TLS, reached with the client's TlsOptions: the writer on the
// allow-list is served, a certificate of the same CA that is not on it is refused.
TEST(AdminClientTlsTest, AllowedWriterIsServedAndOthersRefused) {
  const testing::CertDir certs;
  auto server = ServerProcess::Start(
      {"--demo_table=" + std::to_string(kRows) + "x" + std::to_string(kDim),
       "--demo_seed=" + std::to_string(kSeed), "--admin_address=127.0.0.1:0",
       "--admin_tls_cert=" + certs.Path("server.pem"),
       "--admin_tls_key=" + certs.Path("server.key"),
       "--admin_tls_client_ca=" + certs.Path("ca.pem"),
       "--admin_allowed_identities=spiffe://emb.test/writer", "--drain_seconds=0"});
  ASSERT_THAT(server, IsOk());
  auto tls = [&](const std::string& client) {
    TlsOptions t;
    t.root_certs = certs.Read("ca.pem");
    t.cert_chain = certs.Read(client + ".pem");
    t.private_key = certs.Read(client + ".key");
    t.server_name = "localhost";
    return t;
  };
  std::mt19937_64 rng(5);
  const RowUpdate u = RandomUpdate(rng, 30, DataType::kBFloat16, 1);
  EXPECT_THAT(
      AdminClient::Connect((*server)->admin_target(), tls("client"))->UpdateRows(u, kTimeout),
      StatusIs(absl::StatusCode::kPermissionDenied, HasSubstr("allow-list")));
  EXPECT_THAT(AdminClient::Connect((*server)->admin_target())->UpdateRows(u, kTimeout),
              StatusIs(absl::StatusCode::kUnavailable));  // plaintext to a TLS port
  absl::StatusOr<UpdateAck> ack =
      AdminClient::Connect((*server)->admin_target(), tls("writer"))->UpdateRows(u, kTimeout);
  ASSERT_THAT(ack, IsOk());
  EXPECT_EQ(ack->sequence, 1);
  TableModel model;
  model.Apply(u);
  model.ExpectServed(*EmbeddingClient::Connect((*server)->target()));
}

// A table served from a version directory, DIR/1/t.npy at first, across restarts of the server on
// the same DIR.
class SaveTableServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(std::filesystem::create_directories(dir_ + "/1"));
    const std::string bytes = testing::RandomRows(DataType::kFloat32, kRows * kDim, /*seed=*/9);
    ASSERT_THAT(
        testing::WriteFile(dir_ + "/1/t.npy", testing::NpyFile("<f4", {kRows, kDim}, bytes)),
        IsOk());
    std::vector<float> values(kRows * kDim);
    std::memcpy(values.data(), bytes.data(), bytes.size());
    model_ = std::make_unique<TableModel>(std::move(values));
    Restart();
  }

  // Starts a server on DIR (SIGKILLing the one before, if any: a save must be durable by the
  // time it returns, with no clean shutdown after it).
  void Restart() {
    server_.reset();
    auto server = ServerProcess::Start({"--table=t=" + dir_, "--admin_address=127.0.0.1:0",
                                        "--admin_insecure", "--drain_seconds=0"});
    ASSERT_THAT(server, IsOk());
    server_ = *std::move(server);
    admin_ = AdminClient::Connect(server_->admin_target());
    lookup_ = EmbeddingClient::Connect(server_->target());
  }

  TableInfo Table() {
    absl::StatusOr<std::vector<TableInfo>> tables = lookup_->ListTables(kTimeout);
    EXPECT_THAT(tables, IsOk());
    return tables.ok() && !tables->empty() ? tables->front() : TableInfo();
  }

  // Sends `n` updates of 40 rows in each dtype in turn, from `sequence` + 1; applies them to
  // `model` (which may be a copy of model_) and returns the last sequence.
  int64_t Update(std::mt19937_64& rng, int n, int64_t sequence, TableModel* model) {
    for (int k = 0; k < n; ++k) {
      const RowUpdate u = RandomUpdate(rng, 40, kTypes[k % 3], ++sequence);
      absl::StatusOr<UpdateAck> ack = admin_->UpdateRows(u, kTimeout);
      EXPECT_THAT(ack, IsOk());
      model->Apply(u);
    }
    return sequence;
  }

  const testing::TempDir tmp_;
  const std::string dir_ = tmp_.File("t");
  std::unique_ptr<TableModel> model_;
  std::unique_ptr<ServerProcess> server_;
  std::unique_ptr<AdminClient> admin_;
  std::unique_ptr<EmbeddingClient> lookup_;
};

TEST_F(SaveTableServerTest, ASavedVersionIsServedAfterARestart) {
  TableInfo t = Table();
  EXPECT_EQ(t.name, "t");
  EXPECT_EQ(t.version, 1);
  EXPECT_EQ(t.sequence, 0);
  model_->ExpectServed(*lookup_);
  std::mt19937_64 rng(10);
  const int64_t saved_sequence = Update(rng, 6, 0, model_.get());
  absl::StatusOr<SavedVersion> saved = admin_->SaveTable("", kTimeout);
  ASSERT_THAT(saved, IsOk());
  EXPECT_EQ(saved->table, "t");
  EXPECT_EQ(saved->version, 2);
  EXPECT_EQ(saved->sequence, saved_sequence);
  EXPECT_EQ(std::filesystem::path(saved->path).parent_path(), std::filesystem::path(dir_ + "/2"))
      << saved->path;
  std::error_code error;
  EXPECT_EQ(std::filesystem::file_size(saved->path, error), static_cast<uintmax_t>(saved->bytes))
      << saved->path << ": " << error.message();
  EXPECT_GT(saved->bytes, kRows * kDim * 4);
  t = Table();
  EXPECT_EQ(t.version, 2);  // the running server's table is now version 2
  EXPECT_EQ(t.sequence, saved_sequence);
  // Updates after the save are served now, but are not in version 2.
  TableModel after_save = *model_;
  Update(rng, 2, saved_sequence, &after_save);
  after_save.ExpectServed(*lookup_);

  Restart();
  t = Table();
  EXPECT_EQ(t.version, 2);
  EXPECT_EQ(t.sequence, saved_sequence);
  EXPECT_EQ(t.updated_rows, 0);
  model_->ExpectServed(*lookup_);
  // The sequence goes on from the saved one.
  EXPECT_THAT(
      admin_->UpdateRows(RandomUpdate(rng, 1, DataType::kFloat32, saved_sequence), kTimeout),
      StatusIs(absl::StatusCode::kFailedPrecondition));
  const int64_t second_sequence = Update(rng, 3, saved_sequence, model_.get());
  saved = admin_->SaveTable("t", kTimeout);
  ASSERT_THAT(saved, IsOk());
  EXPECT_EQ(saved->version, 3);
  EXPECT_EQ(saved->sequence, second_sequence);

  Restart();
  t = Table();
  EXPECT_EQ(t.version, 3);
  EXPECT_EQ(t.sequence, second_sequence);
  model_->ExpectServed(*lookup_);
}

}  // namespace
}  // namespace emb::client
