// Start-up failures: each stops the real server with one "stopping: ..." line that names the
// problem, and a non-zero exit status. A busy gRPC port is one of them: gRPC's default
// SO_REUSEPORT would otherwise let a second server share the port and silently take part of the
// traffic.
#include <signal.h>
#include <sys/stat.h>

#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "client/embedding_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/server_process.h"
#include "tests/testing/table_files.h"

namespace emb::startup_test {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testing::ServerProcess;

// The one line the server logged about why it stopped.
std::string StoppingLine(const std::string& log) {
  const size_t at = log.find("stopping: ");
  return at == std::string::npos ? "" : log.substr(at, log.find('\n', at) - at);
}

TEST(StartUp, BusyGrpcPortStopsTheSecondServerAndTheFirstServesOn) {
  auto first = ServerProcess::Start({"--demo_table=100x4"});
  ASSERT_TRUE(first.ok()) << first.status();
  for (const std::string host : {"127.0.0.1", "0.0.0.0"}) {
    const std::string address = host + ":" + std::to_string((*first)->grpc_port());
    const ServerProcess::Exit second =
        ServerProcess::RunToExit({"--demo_table=100x4", "--grpc_address=" + address});
    EXPECT_EQ(second.code, 1) << second.log;
    EXPECT_THAT(
        StoppingLine(second.log),
        HasSubstr("cannot listen for gRPC on --grpc_address=" + address + ": the port is in use"))
        << second.log;
    // One clear line: none of gRPC's own (its log lines start "E1202 ..." and span several).
    EXPECT_THAT(second.log, Not(HasSubstr("UNKNOWN:"))) << second.log;
    EXPECT_THAT(second.log, Not(HasSubstr("Failed to add"))) << second.log;
  }
  auto client = client::EmbeddingClient::Connect((*first)->target());
  auto health = client->CheckHealth("", absl::Seconds(10));
  ASSERT_TRUE(health.ok()) << health.status();
  EXPECT_EQ(*health, "SERVING");
}

TEST(StartUp, BusyMetricsPortStopsStartUp) {
  auto first = ServerProcess::Start({"--demo_table=100x4"});
  ASSERT_TRUE(first.ok()) << first.status();
  const std::string address = "127.0.0.1:" + std::to_string((*first)->metrics_port());
  const ServerProcess::Exit second =
      ServerProcess::RunToExit({"--demo_table=100x4", "--metrics_address=" + address});
  EXPECT_EQ(second.code, 1) << second.log;
  EXPECT_THAT(
      StoppingLine(second.log),
      HasSubstr("cannot serve metrics on --metrics_address=" + address + ": the port is in use"));
  EXPECT_THAT(second.log, Not(HasSubstr("CivetServer"))) << second.log;
}

TEST(StartUp, BadFlagValuesStopStartUpNamingTheFlag) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--grpc_address=nonsense", "--grpc_address=nonsense: expected HOST:PORT"},
      {"--grpc_address=127.0.0.1:70000", "--grpc_address=127.0.0.1:70000: expected HOST:PORT"},
      {"--grpc_address=192.0.2.1:50051", "cannot listen for gRPC on --grpc_address=192.0.2.1"},
      {"--metrics_address=127.0.0.1:-1", "--metrics_address=127.0.0.1:-1: expected HOST:PORT"},
      {"--device=tpu", "--device=tpu"},
      {"--device=cpu,tpu", "--device=tpu: expected auto, cpu, cuda or cuda:N"},
      {"--placement=mirror", "--placement=mirror: expected replicas or rows"},
      {"--demo_table=12", "--demo_table=12: expected ROWSxDIM"},
      {"--demo_table=0x4", "--demo_table"},
      {"--demo_table=4000000000000000000x1024", "must fit in 64 bits"},
      {"--max_batch_ids=0", "--max_batch_ids (0)"},
      {"--max_request_ids=70000", "--max_request_ids (70000) must be in [1, --max_batch_ids"},
      {"--max_queue_ids=10", "--max_queue_ids (10) must be at least --max_batch_ids"},
      {"--max_response_bytes=0", "--max_response_bytes must be in"},
      {"--max_queue_delay_us=-5", "--max_queue_delay_us must not be negative"},
      {"--completion_poll_us=-1", "--completion_poll_us must not be negative"},
      {"--answer_threads=-7", "--answer_threads must be -1"},
      {"--inline_batches=-1", "--inline_batches must not be negative"},
      {"--answer_pool_bytes=-1", "--answer_pool_bytes must not be negative"},
      {"--inflight_batches=0", "--inflight_batches must be at least 1"},
      {"--zero_copy_max_bytes=-1", "--zero_copy_max_bytes must not be negative"},
      {"--drain_seconds=-1", "--drain_seconds=-1: must be in [0, 86400]"},
      {"--shutdown_timeout_seconds=nan", "--shutdown_timeout_seconds=nan: must be in"},
      {"--table=noequals", "--table=noequals: expected NAME=PATH"},
      {"--default_table=nope", "--default_table=nope names no --table"},
      {"--max_unsent_answer_bytes_per_connection=1000",
       "--max_unsent_answer_bytes_per_connection (1000)"},
      {"--max_unsent_answer_bytes=1000", "--max_unsent_answer_bytes (1000) must be at least"},
      {"--grpc_memory_bytes=0", "--grpc_memory_bytes must be positive"},
  };
  for (const auto& [flag, message] : cases) {
    const ServerProcess::Exit exit = ServerProcess::RunToExit({"--demo_table=100x4", flag});
    EXPECT_EQ(exit.code, 1) << flag << "\n" << exit.log;
    EXPECT_THAT(StoppingLine(exit.log), HasSubstr(message)) << flag << "\n" << exit.log;
  }
}

// A table's own devices= and placement= beside --device: the table split over two CPU stores
// answers its file's rows; a bad list stops start-up naming the table.
TEST(StartUp, ATableTakesItsOwnDevicesAndPlacement) {
  constexpr int64_t kRows = 101;
  constexpr int64_t kDim = 6;
  testing::TempDir dir;
  const std::string data = testing::RandomRows(DataType::kFloat32, kRows * kDim, 3);
  const std::string path = dir.File("t.npy");
  ASSERT_TRUE(testing::WriteFile(path, testing::NpyFile("<f4", {kRows, kDim}, data)).ok());
  auto server = ServerProcess::Start({"--device=cpu", "--table=plain=" + path,
                                      "--table=split=" + path + ",devices=cpu+cpu,placement=rows"});
  ASSERT_TRUE(server.ok()) << server.status();
  auto client = client::EmbeddingClient::Connect((*server)->target());
  auto tables = client->ListTables(absl::Seconds(10));
  ASSERT_TRUE(tables.ok()) << tables.status();
  ASSERT_EQ(tables->size(), 2u);
  EXPECT_EQ((*tables)[0].device, "cpu");
  EXPECT_TRUE((*tables)[0].parts.empty());
  EXPECT_EQ((*tables)[1].device, "cpu,cpu");
  EXPECT_EQ((*tables)[1].placement, "rows");
  ASSERT_EQ((*tables)[1].parts.size(), 2u);
  EXPECT_EQ((*tables)[1].parts[1].first_row, 51);  // blocks of ceil(101 / 2) rows
  const std::vector<int64_t> ids = {100, 0, 50, 51, 7, 51};
  auto result = client->LookUp("split", ids, {}, DataType::kFloat32, absl::Seconds(10));
  ASSERT_TRUE(result.ok()) << result.status();
  const std::vector<float> got = result->ToFloat32();
  ASSERT_EQ(got.size(), ids.size() * kDim);
  for (size_t i = 0; i < ids.size(); ++i) {
    EXPECT_EQ(std::memcmp(got.data() + i * kDim, data.data() + ids[i] * kDim * sizeof(float),
                          kDim * sizeof(float)),
              0)
        << "id " << ids[i];
  }
  EXPECT_THAT((*server)->log(), HasSubstr("table 'split' part 1 on cpu: rows 51..100"));

  const ServerProcess::Exit bad =
      ServerProcess::RunToExit({"--device=cpu", "--table=split=" + path + ",devices=cpu+gpu9"});
  EXPECT_NE(bad.code, 0);
  EXPECT_THAT(StoppingLine(bad.log), HasSubstr("table 'split': devices=cpu,gpu9: --device=gpu9"));
}

TEST(StartUp, UnreadableTableStopsStartUpBeforeThePortOpens) {
  testing::TempDir dir;
  ASSERT_TRUE(testing::WriteFile(dir.File("plain"), "x").ok());
  const std::string fifo = dir.File("t.fifo");  // no writer: open() without O_NONBLOCK hangs
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {dir.File("missing.npy"), "cannot open: No such file or directory"},
      {fifo, "a FIFO, not a regular file"},
      {"/dev/zero", "a character device, not a regular file"},
      {dir.File("plain") + "/t.npy", "cannot open: Not a directory"},
  };
  for (const auto& [path, message] : cases) {
    const ServerProcess::Exit exit = ServerProcess::RunToExit({"--table=t=" + path});
    EXPECT_EQ(exit.code, 1) << path << "\n" << exit.log;
    EXPECT_THAT(StoppingLine(exit.log), HasSubstr(path + ": " + message)) << exit.log;
    EXPECT_THAT(exit.log, Not(HasSubstr("listening"))) << path;
  }
  // A directory is a version directory (DIR/1/, DIR/2/, ...): one without a version says so.
  const ServerProcess::Exit exit = ServerProcess::RunToExit({"--table=t=" + dir.path()});
  EXPECT_EQ(exit.code, 1) << exit.log;
  EXPECT_THAT(StoppingLine(exit.log),
              HasSubstr("no version in " + dir.path() +
                        " can be served (it holds no numbered version directory"))
      << exit.log;
  EXPECT_THAT(exit.log, Not(HasSubstr("listening")));
}

// Flag files are read before Abseil follows them: a directory, a FIFO or /dev/zero, and a file
// that includes itself (directly or through another), each stop start-up at once, naming it.
TEST(StartUp, BadFlagFilesStopStartUpNamingTheFile) {
  testing::TempDir dir;
  const std::string fifo = dir.File("flags.fifo");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  const std::string self = dir.File("self.flags");
  ASSERT_TRUE(testing::WriteFile(self, "--demo_table=100x4\n--flagfile=" + self + "\n").ok());
  const std::string a = dir.File("a.flags");
  const std::string b = dir.File("b.flags");
  ASSERT_TRUE(testing::WriteFile(a, "# a\n--flagfile=" + b + "\n").ok());
  ASSERT_TRUE(testing::WriteFile(b, "--flagfile=" + a + "\n").ok());
  const std::vector<std::pair<std::string, std::string>> cases = {
      {dir.path(), "--flagfile=" + dir.path() + ": a directory, not a regular file"},
      {fifo, "--flagfile=" + fifo + ": a FIFO, not a regular file"},
      {"/dev/zero", "--flagfile=/dev/zero: a character device, not a regular file"},
      {self, "--flagfile=" + self + ": includes itself"},
      {a, "--flagfile=" + a + ": includes itself"},
  };
  for (const auto& [file, message] : cases) {
    const ServerProcess::Exit exit = ServerProcess::RunToExit({"--flagfile=" + file});
    EXPECT_EQ(exit.code, 1) << file << "\n" << exit.log;
    EXPECT_THAT(StoppingLine(exit.log), HasSubstr(message)) << file << "\n" << exit.log;
  }
}

// Flag files that include others without a cycle are bounded in all (issue 41, item 7a): a
// fan-out of 30 files a level, 6 levels deep, would read 30^6 files, and start-up hung with no
// log line. The bound on files read and the bound on their bytes each stop it at once.
TEST(StartUp, AFlagFileFanOutStopsStartUpAtTheBound) {
  testing::TempDir dir;
  constexpr int kLevels = 6;
  constexpr int kFiles = 30;
  auto name = [&](int level, int i) {
    return dir.File("l" + std::to_string(level) + "_" + std::to_string(i) + ".flags");
  };
  for (int level = 0; level < kLevels; ++level) {
    std::string text = "--demo_table=100x4\n";
    if (level + 1 < kLevels) {
      for (int i = 0; i < kFiles; ++i) {
        text += "--flagfile=" + name(level + 1, i) + "\n";
      }
    }
    for (int i = 0; i < kFiles; ++i) {
      ASSERT_TRUE(testing::WriteFile(name(level, i), text).ok());
    }
  }
  // 6 files of 900 KB of comments, each under the 1 MiB bound of one file.
  const std::string big = dir.File("big.flags");
  ASSERT_TRUE(testing::WriteFile(big, std::string(900 << 10, '#') + "\n--demo_table=100x4\n").ok());
  std::string bigs = "--flagfile=";
  for (int i = 0; i < 6; ++i) {
    bigs += (i == 0 ? "" : ",") + big;
  }
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--flagfile=" + name(0, 0), "flag files would be read more than 256 times in all"},
      {bigs, "flag files hold more than 4194304 bytes in all"},
  };
  for (const auto& [flag, message] : cases) {
    const absl::Time start = absl::Now();
    const ServerProcess::Exit exit = ServerProcess::RunToExit({flag}, absl::Seconds(20));
    EXPECT_EQ(exit.code, 1) << exit.log;
    EXPECT_THAT(StoppingLine(exit.log), HasSubstr(message)) << exit.log;
    EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  }
}

// Every start-up failure exits 1 (issue 40): Abseil's own refusals of a flag's syntax (an unknown
// flag, a value that does not parse) as well as the server's checks of the values.
TEST(StartUp, FlagSyntaxErrorsExitOne) {
  for (const std::string flag : {"--no_such_flag=1", "--drain_seconds=abc", "--max_batch_ids=x"}) {
    const ServerProcess::Exit exit = ServerProcess::RunToExit({"--demo_table=100x4", flag});
    EXPECT_EQ(exit.code, 1) << flag << "\n" << exit.log;
    EXPECT_THAT(exit.log, Not(HasSubstr("listening"))) << flag;
  }
}

// --admin_insecure on an address other than loopback is refused before any port opens (issue
// 40: it was refused only after the gRPC port had opened), as are the other admin flag errors.
TEST(StartUp, AdminFlagErrorsStopStartUpBeforeAnyPortOpens) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--admin_address=0.0.0.0:0", "--admin_insecure"},
       "--admin_insecure serves writes to every caller, so only on a literal loopback address"},
      {{"--admin_address=192.0.2.1:0", "--admin_insecure"}, "not --admin_address=192.0.2.1:0"},
      // A name is not a loopback address, whatever it starts with (issue 41, item 7d).
      {{"--admin_address=127.example.com:0", "--admin_insecure"},
       "only on a literal loopback address (127.0.0.0/8, [::1], or localhost itself), not "
       "--admin_address=127.example.com:0"},
      {{"--admin_insecure"}, "need --admin_address"},
      {{"--admin_address=127.0.0.1:0"}, "--admin_address needs mutual TLS"},
      {{"--admin_address=nonsense", "--admin_insecure"}, "--admin_address=nonsense"},
      {{"--admin_address=127.0.0.1:0", "--admin_insecure", "--admin_max_message_bytes=0"},
       "--admin_max_message_bytes must be in"},
  };
  for (const auto& [flags, message] : cases) {
    std::vector<std::string> args = {"--demo_table=100x4"};
    args.insert(args.end(), flags.begin(), flags.end());
    const ServerProcess::Exit exit = ServerProcess::RunToExit(args);
    EXPECT_EQ(exit.code, 1) << flags.front() << "\n" << exit.log;
    EXPECT_THAT(StoppingLine(exit.log), HasSubstr(message)) << exit.log;
    EXPECT_THAT(exit.log, Not(HasSubstr("listening"))) << exit.log;
    EXPECT_THAT(exit.log, Not(HasSubstr("gRPC port"))) << exit.log;
  }
}

// A table name reaches ListTables, the logs and Prometheus labels: printable UTF-8 only.
TEST(StartUp, ATableNameThatIsNotUtf8StopsStartUp) {
  const ServerProcess::Exit exit = ServerProcess::RunToExit({"--table=bad\xff=/data/t.npy"});
  EXPECT_EQ(exit.code, 1) << exit.log;
  EXPECT_THAT(StoppingLine(exit.log), HasSubstr("--table: table name 'bad\\xff' is not printable"))
      << exit.log;
}

// A stop signal during start-up stops the server at once (exit 0), before the load ends and before
// health ever says SERVING. The table takes seconds to make (1 GB); the signal goes out as soon as
// the signal thread runs (its first line, the open-files limit, comes after it starts).
TEST(StartUp, SigtermDuringStartUpStopsBeforeServing) {
  auto server = ServerProcess::Start({"--demo_table=1000000x256"}, absl::Seconds(60),
                                     /*ready_text=*/"open files: limit");
  ASSERT_TRUE(server.ok()) << server.status();
  (*server)->Signal(SIGTERM);
  EXPECT_EQ((*server)->WaitExit(absl::Seconds(60)), 0) << (*server)->log();
  EXPECT_THAT((*server)->log(),
              HasSubstr("received SIGTERM during start-up: stopping before serving"));
  EXPECT_THAT((*server)->log(), Not(HasSubstr("health SERVING")));
}

// 400 TB of rows: more than the host (CPU backend) or the GPU (CUDA backend) holds.
TEST(StartUp, TableTooLargeForTheDeviceStopsStartUpSayingHowLarge) {
  const ServerProcess::Exit exit =
      ServerProcess::RunToExit({"--demo_table=100000000000x1024"}, absl::Seconds(120));
  EXPECT_EQ(exit.code, 1) << exit.log;
  const std::string line = StoppingLine(exit.log);
  if (ServerProcess::TestOnCpu()) {
    EXPECT_THAT(line, HasSubstr("cannot allocate 409600000000000 bytes of host memory")) << line;
  } else {
    EXPECT_THAT(line, HasSubstr("does not fit on cuda")) << line;
    EXPECT_THAT(line, HasSubstr("409600000000000")) << line;
  }
}

}  // namespace
}  // namespace emb::startup_test
