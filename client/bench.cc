#include "client/bench.h"

#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>

#include <cstdint>
#include <limits>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/bench/request_pool.h"
#include "client/bench/run_loops.h"
#include "client/embedding_client.h"
#include "embedding/v1/embedding_service.grpc.pb.h"

namespace emb::client {
namespace {

namespace pb = ::embedding::v1;
using internal::CallStats;
using internal::NowNanos;
using internal::RunState;

// Channel `i` of the run: CreateChannel's, unless the config limits the answer size.
std::shared_ptr<grpc::Channel> MakeChannel(const BenchConfig& config, int i) {
  if (config.max_recv_message_bytes < 0) {
    return CreateChannel(config.target, config.tls, i);
  }
  grpc::ChannelArguments args = DefaultChannelArguments(i);
  // DefaultChannelArguments lifts the channel's receive limit, and a second value for the same
  // argument would be ignored; a service config's per-method limit applies on top of it. Only
  // LookUp's answers are limited, as ghz's limit meets only them (ListTables sets the run up).
  args.SetServiceConfigJSON(
      absl::StrCat(R"({"methodConfig":[{"name":[{"service":"embedding.v1.EmbeddingService",)"
                   R"("method":"LookUp"}],)",
                   R"("maxResponseMessageBytes":")", config.max_recv_message_bytes, R"("}]})"));
  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
  if (config.tls.has_value()) {  // as CreateChannel does
    grpc::SslCredentialsOptions options;
    options.pem_root_certs = config.tls->root_certs;
    options.pem_cert_chain = config.tls->cert_chain;
    options.pem_private_key = config.tls->private_key;
    if (!config.tls->server_name.empty()) {
      args.SetSslTargetNameOverride(config.tls->server_name);
    }
    credentials = grpc::SslCredentials(options);
  }
  return grpc::CreateCustomChannel(config.target, credentials, args);
}

}  // namespace

absl::StatusOr<BenchReport> RunBench(const BenchConfig& config) {
  if (absl::Status s = ValidateBenchConfig(config); !s.ok()) {
    return s;
  }
  RunState run;
  run.config = &config;
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  const auto connect_deadline = absl::ToChronoTime(absl::Now() + config.timeout);
  for (int i = 0; i < config.connections; ++i) {
    channels.push_back(MakeChannel(config, i));
    if (!channels.back()->WaitForConnected(connect_deadline)) {
      return absl::UnavailableError(absl::StrCat("could not connect to ", config.target, " within ",
                                                 absl::FormatDuration(config.timeout)));
    }
    run.stubs.push_back(pb::EmbeddingService::NewStub(channels.back()));
  }

  BenchReport report;
  {
    EmbeddingClient client(channels.front());
    absl::StatusOr<std::vector<TableInfo>> tables = client.ListTables(config.timeout);
    if (!tables.ok()) {
      return tables.status();
    }
    const TableInfo* found = nullptr;
    for (const TableInfo& t : *tables) {
      if (config.table.empty() ? t.is_default : t.name == config.table) {
        found = &t;
        break;
      }
    }
    if (found == nullptr && config.table.empty() && !tables->empty()) {
      found = &tables->front();  // the default table comes first
    }
    if (found == nullptr) {
      return absl::NotFoundError(
          config.table.empty() ? "the server has no tables"
                               : absl::StrCat("the server has no table \"", config.table, "\""));
    }
    report.table = found->name;
    report.rows = found->rows;
    report.dim = found->dim;
  }

  absl::StatusOr<std::vector<pb::LookUpRequest>> pool = MakeRequestPool(config, report.rows);
  if (!pool.ok()) {
    return pool.status();
  }
  run.pool = *std::move(pool);

  const int64_t start_ns = NowNanos();
  run.measure_start_ns = start_ns + absl::ToInt64Nanoseconds(config.warmup);
  run.stop_ns = config.requests > 0
                    ? std::numeric_limits<int64_t>::max()
                    : run.measure_start_ns + absl::ToInt64Nanoseconds(config.duration);
  CallStats stats = config.rps > 0    ? RunOpenLoop(&run, start_ns)
                    : config.blocking ? RunClosedLoopBlocking(&run)
                                      : RunClosedLoop(&run);

  report.requests = static_cast<int64_t>(stats.latencies.count());
  report.duration_s = report.requests > 0
                          ? static_cast<double>(stats.last_done_ns - run.measure_start_ns) / 1e9
                          : 0.0;
  report.ok_ids = stats.ok_ids;
  report.payload_bytes = stats.payload_bytes;
  report.latency = stats.latencies.Summarize();
  report.ok_latency = stats.ok_latencies.Summarize();
  report.unsent = run.unsent;
  for (const auto& [code, n] : stats.codes) {
    report.codes[absl::StatusCodeToString(static_cast<absl::StatusCode>(code))] = n;
  }
  for (const auto& [code, message] : stats.first_messages) {
    report.first_messages[absl::StatusCodeToString(static_cast<absl::StatusCode>(code))] = message;
  }
  return report;
}

}  // namespace emb::client
