// TLS and mutual TLS on the gRPC port: the real embedding-server binary with its --tls_* flags,
// called through emb::client (and its load generator), with certificates that
// tests/testing/make_test_certs.sh makes with the openssl command in a temporary folder.
#include <stdlib.h>
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "client/bench.h"
#include "client/embedding_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/cert_dir.h"
#include "tests/testing/demo_table.h"
#include "tests/testing/server_process.h"
#include "tests/testing/table_files.h"

namespace emb::tls_test {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testing::ServerProcess;

constexpr int64_t kRows = 1000;
constexpr int64_t kDim = 24;
constexpr uint64_t kSeed = 5;
constexpr absl::Duration kTimeout = absl::Seconds(20);

using testing::CertDir;

client::TlsOptions Tls(const CertDir& certs, const std::string& ca,
                       const std::string& client = "") {
  client::TlsOptions tls;
  tls.root_certs = certs.Read(ca);
  if (!client.empty()) {
    tls.cert_chain = certs.Read(client + ".pem");
    tls.private_key = certs.Read(client + ".key");
  }
  return tls;
}

std::vector<std::string> DemoFlags() {
  return {"--demo_table=" + std::to_string(kRows) + "x" + std::to_string(kDim),
          "--demo_seed=" + std::to_string(kSeed)};
}

// Rows `ids` of the demo table the server serves, made in-process from the same seed.
std::string Expected(absl::Span<const int64_t> ids) {
  static const auto* table = new testing::DemoTable(kRows, kDim, kSeed);
  return table->Rows(ids);
}

// A LookUp of a few ids (the first and last rows among them) with its rows checked.
void ExpectServed(client::EmbeddingClient& client) {
  const std::vector<int64_t> ids = {0, kRows - 1, 17, 17, 503};
  const std::vector<int64_t> shape = {5};
  auto result = client.LookUp("", ids, shape, DataType::kFloat32, kTimeout);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->shape, (std::vector<int64_t>{5, kDim}));
  EXPECT_TRUE(result->data == Expected(ids)) << "rows differ";
}

absl::Status LookUpStatus(client::EmbeddingClient& client) {
  const std::vector<int64_t> ids = {1, 2};
  return client.LookUp("", ids, {}, std::nullopt, kTimeout).status();
}

// One server per suite: TLS (`client_ca` empty) or mutual TLS.
class TlsServerTest : public ::testing::Test {
 protected:
  static void StartServer(bool mutual) {
    certs_ = new CertDir();
    std::vector<std::string> args = DemoFlags();
    args.push_back("--tls_cert=" + certs_->Path("server.pem"));
    args.push_back("--tls_key=" + certs_->Path("server.key"));
    if (mutual) {
      args.push_back("--tls_client_ca=" + certs_->Path("ca.pem"));
    }
    auto server = ServerProcess::Start(args);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = server->release();
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
    delete certs_;
    certs_ = nullptr;
  }

  std::unique_ptr<client::EmbeddingClient> Connect(std::optional<client::TlsOptions> tls) {
    return client::EmbeddingClient::Connect(server_->target(), tls);
  }

  static CertDir* certs_;
  static ServerProcess* server_;
};

CertDir* TlsServerTest::certs_ = nullptr;
ServerProcess* TlsServerTest::server_ = nullptr;

class TlsTest : public TlsServerTest {
 protected:
  static void SetUpTestSuite() { StartServer(/*mutual=*/false); }
};

TEST_F(TlsTest, ClientTrustingTheCaIsServed) {
  auto client = Connect(Tls(*certs_, "ca.pem"));
  ExpectServed(*client);
  auto tables = client->ListTables(kTimeout);
  ASSERT_TRUE(tables.ok()) << tables.status();
  EXPECT_EQ(tables->size(), 1u);
  auto health = client->CheckHealth("embedding.v1.EmbeddingService", kTimeout);
  ASSERT_TRUE(health.ok()) << health.status();
  EXPECT_EQ(*health, "SERVING");
}

TEST_F(TlsTest, ClientWithACertificateIsServedToo) {
  auto client = Connect(Tls(*certs_, "ca.pem", "client"));
  ExpectServed(*client);
}

TEST_F(TlsTest, LocalhostTargetMatchesTheCertificatesDnsName) {
  auto client = client::EmbeddingClient::Connect(
      "localhost:" + std::to_string(server_->grpc_port()), Tls(*certs_, "ca.pem"));
  ExpectServed(*client);
}

TEST_F(TlsTest, ServerNameOverrideIsWhatTheCertificateMustName) {
  client::TlsOptions tls = Tls(*certs_, "ca.pem");
  tls.server_name = "localhost";
  ExpectServed(*Connect(tls));
  tls.server_name = "embeddings.example.com";
  EXPECT_EQ(LookUpStatus(*Connect(tls)).code(), absl::StatusCode::kUnavailable);
}

TEST_F(TlsTest, PlaintextClientIsRefused) {
  absl::Status s = LookUpStatus(*Connect(std::nullopt));
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
}

TEST_F(TlsTest, ClientTrustingAnotherCaIsRefused) {
  absl::Status s = LookUpStatus(*Connect(Tls(*certs_, "other_ca.pem")));
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
}

TEST_F(TlsTest, LoadGeneratorRunsOverTls) {
  client::BenchConfig config;
  config.target = server_->target();
  config.tls = Tls(*certs_, "ca.pem");
  config.connections = 2;  // per-connection channel arguments, each channel with TLS
  config.concurrency = 4;
  config.requests = 200;
  config.warmup = absl::ZeroDuration();
  config.ids_per_request = 8;
  config.timeout = kTimeout;
  auto report = client::RunBench(config);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->requests, 200);
  EXPECT_EQ(report->codes, (std::map<std::string, int64_t>{{"OK", 200}}));
  EXPECT_EQ(report->ok_ids, 200 * 8);
}

TEST_F(TlsTest, StartUpLogSaysTlsAndMetricsStayPlainHttp) {
  EXPECT_THAT(server_->log(), HasSubstr("gRPC port: TLS (certificate /CN=localhost from " +
                                        certs_->Path("server.pem") + ")"));
  auto metrics = testing::HttpGet(server_->metrics_port(), "/metrics");
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  EXPECT_THAT(*metrics, HasSubstr("embedding_table_rows"));
}

class MutualTlsTest : public TlsServerTest {
 protected:
  static void SetUpTestSuite() { StartServer(/*mutual=*/true); }

  // A load-generator run of `requests` calls over 2 connections with the CA's client certificate.
  static client::BenchConfig MutualTlsBench(int64_t requests) {
    client::BenchConfig config;
    config.target = server_->target();
    config.tls = Tls(*certs_, "ca.pem", "client");
    config.connections = 2;
    config.requests = requests;
    config.warmup = absl::ZeroDuration();
    config.timeout = kTimeout;
    return config;
  }
};

TEST_F(MutualTlsTest, ClientWithACertificateFromTheCaIsServed) {
  auto client = Connect(Tls(*certs_, "ca.pem", "client"));
  ExpectServed(*client);
  auto health = client->CheckHealth("", kTimeout);
  ASSERT_TRUE(health.ok()) << health.status();
  EXPECT_EQ(*health, "SERVING");
}

TEST_F(MutualTlsTest, ClientWithoutACertificateIsRefused) {
  absl::Status s = LookUpStatus(*Connect(Tls(*certs_, "ca.pem")));
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
}

TEST_F(MutualTlsTest, ClientWithACertificateFromAnotherCaIsRefused) {
  absl::Status s = LookUpStatus(*Connect(Tls(*certs_, "ca.pem", "other_client")));
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
}

TEST_F(MutualTlsTest, PlaintextClientIsRefused) {
  absl::Status s = LookUpStatus(*Connect(std::nullopt));
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
}

TEST_F(MutualTlsTest, LoadGeneratorRunsWithAClientCertificate) {
  auto report = client::RunBench(MutualTlsBench(100));
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->codes, (std::map<std::string, int64_t>{{"OK", 100}}));
}

// A receive limit gives the load generator channels of its own (bench.cc's MakeChannel): they
// speak mutual TLS too, and the limit holds on them.
TEST_F(MutualTlsTest, LoadGeneratorWithAReceiveLimitRunsWithAClientCertificate) {
  client::BenchConfig config = MutualTlsBench(50);
  config.call_data = {R"({"ids": ["{{randomInt 0 10}}", "3"], "dtype": "DATA_TYPE_FLOAT16"})"};
  config.max_recv_message_bytes = 1 << 20;
  auto report = client::RunBench(config);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->codes, (std::map<std::string, int64_t>{{"OK", 50}}));
  EXPECT_EQ(report->ok_ids, 50 * 2);
  EXPECT_EQ(report->payload_bytes, 50 * 2 * report->dim * 2);  // float16, as the data says
  config.max_recv_message_bytes = 16;                          // smaller than any answer
  report = client::RunBench(config);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->codes, (std::map<std::string, int64_t>{{"RESOURCE_EXHAUSTED", 50}}));
}

TEST_F(MutualTlsTest, StartUpLogSaysMutualTls) {
  EXPECT_THAT(server_->log(), HasSubstr("gRPC port: mutual TLS (certificate /CN=localhost from " +
                                        certs_->Path("server.pem") +
                                        "; clients need a certificate signed by a CA in " +
                                        certs_->Path("ca.pem") + ")"));
}

TEST(TlsFlags, PlaintextWithoutThemIsLogged) {
  auto server = ServerProcess::Start(DemoFlags());
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_THAT((*server)->log(), HasSubstr("gRPC port: plaintext"));
  ExpectServed(*client::EmbeddingClient::Connect((*server)->target()));
}

TEST(TlsFlags, BadFlagsStopStartUpNamingTheFlagAndTheProblem) {
  const CertDir certs;
  const std::string cert = "--tls_cert=" + certs.Path("server.pem");
  const std::string key = "--tls_key=" + certs.Path("server.key");
  const std::string missing = certs.Path("missing.pem");
  const std::string garbage = certs.Write("garbage.pem", "not a certificate\n");
  const std::string empty = certs.Write("empty.pem", "");
  const std::string fifo =
      certs.Path("cert.fifo");  // no writer: an open() without O_NONBLOCK hangs
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  struct Case {
    std::vector<std::string> flags;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{cert}, "--tls_cert is given without --tls_key: TLS needs both"},
      {{key}, "--tls_key is given without --tls_cert: TLS needs both"},
      {{"--tls_client_ca=" + certs.Path("ca.pem")},
       "--tls_client_ca needs --tls_cert and --tls_key"},
      {{"--tls_cert=" + missing, key},
       "--tls_cert=" + missing + ": cannot open: No such file or directory"},
      {{cert, "--tls_key=" + certs.Path("")},
       "--tls_key=" + certs.Path("") + ": a directory, not a regular file"},
      {{"--tls_cert=" + fifo, key}, "--tls_cert=" + fifo + ": a FIFO, not a regular file"},
      {{"--tls_cert=/dev/zero", key},
       "--tls_cert=/dev/zero: a character device, not a regular file"},
      {{"--tls_cert=" + certs.Path("expired.pem"), key},
       "--tls_cert=" + certs.Path("expired.pem") + ": the certificate expired on "},
      {{"--tls_cert=" + certs.Path("not_yet_valid.pem"), key},
       "--tls_cert=" + certs.Path("not_yet_valid.pem") + ": the certificate is not valid until "},
      {{"--tls_cert=" + empty, key}, "--tls_cert=" + empty + ": empty file"},
      {{"--tls_cert=" + garbage, key}, "--tls_cert=" + garbage + ": no PEM certificate in it"},
      {{cert, "--tls_key=" + certs.Path("server.pem")},
       "--tls_key=" + certs.Path("server.pem") + ": no unencrypted PEM private key in it"},
      {{cert, "--tls_key=" + certs.Path("encrypted.key")},
       "--tls_key=" + certs.Path("encrypted.key") + ": no unencrypted PEM private key in it"},
      {{cert, "--tls_key=" + certs.Path("client.key")},
       "--tls_key=" + certs.Path("client.key") +
           ": does not match the certificate in --tls_cert=" + certs.Path("server.pem")},
      {{cert, key, "--tls_client_ca=" + garbage},
       "--tls_client_ca=" + garbage + ": no PEM certificate in it"},
      {{cert, key, "--tls_client_ca=" + missing},
       "--tls_client_ca=" + missing + ": cannot open: No such file or directory"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args = DemoFlags();
    args.insert(args.end(), c.flags.begin(), c.flags.end());
    const ServerProcess::Exit exit = ServerProcess::RunToExit(args);
    EXPECT_EQ(exit.code, 1) << c.message;
    EXPECT_THAT(exit.log, HasSubstr("stopping: " + c.message));
    EXPECT_THAT(exit.log, Not(HasSubstr("listening")));
  }
}

TEST(TlsFlags, HelpListsThem) {
  const ServerProcess::Exit exit = ServerProcess::RunToExit({"--help"});
  for (const char* flag : {"tls_cert", "tls_key", "tls_client_ca"}) {
    EXPECT_THAT(exit.log, HasSubstr(std::string(flag) + " ")) << flag;
  }
}

}  // namespace
}  // namespace emb::tls_test
