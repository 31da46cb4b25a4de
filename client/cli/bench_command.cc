// embedding-client bench: the load generator, from flags or a ghz config file.
#include <cstdint>
#include <iostream>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/bench.h"
#include "client/bench/config.h"
#include "client/bench/ghz_config.h"
#include "client/bench/id_sampler.h"
#include "client/bench/report.h"
#include "client/cli/commands.h"
#include "client/cli/common.h"
#include "client/cli/flags.h"
#include "client/embedding_client.h"
#include "kernels/data_type.h"

namespace emb::client::cli {
namespace {

// bench's exit status when the run finished but some calls did not return OK (its report is
// printed all the same); 1 is for a run that could not be made.
constexpr int kCallsFailed = 3;

// "N of M calls failed: CODE n, ..." for a report with calls that did not return OK, else "".
std::string FailedCalls(const BenchReport& report) {
  int64_t failed = 0;
  std::vector<std::string> codes;
  for (const auto& [code, n] : report.codes) {
    if (code != "OK") {
      failed += n;
      const auto message = report.first_messages.find(code);
      codes.push_back(absl::StrCat(code, " ", n,
                                   message == report.first_messages.end()
                                       ? ""
                                       : absl::StrCat(" (first: \"", message->second, "\")")));
    }
  }
  if (failed == 0) {
    return "";
  }
  return absl::StrCat(failed, " of ", report.requests,
                      " calls failed: ", absl::StrJoin(codes, ", "), " (exit status ", kCallsFailed,
                      ")");
}

}  // namespace

int BenchCommand(const std::vector<std::string>& args, std::optional<TlsOptions> tls,
                 const std::set<std::string>& flags_given) {
  if (!args.empty()) {
    return Fail("bench", absl::InvalidArgumentError("takes no arguments, only flags"));
  }
  BenchConfig config;
  config.target = LookUpTarget();
  config.tls = std::move(tls);
  config.connections = absl::GetFlag(FLAGS_connections);
  config.concurrency = absl::GetFlag(FLAGS_concurrency);
  config.blocking = absl::GetFlag(FLAGS_blocking);
  config.rps = absl::GetFlag(FLAGS_rps);
  config.max_inflight = absl::GetFlag(FLAGS_max_inflight);
  config.duration = absl::GetFlag(FLAGS_duration).value;
  config.requests = absl::GetFlag(FLAGS_requests);
  config.warmup = absl::GetFlag(FLAGS_warmup).value;
  config.ids_per_request = absl::GetFlag(FLAGS_ids_per_request);
  config.zipf_exponent = absl::GetFlag(FLAGS_zipf_exponent);
  config.table = absl::GetFlag(FLAGS_table);
  config.seed = absl::GetFlag(FLAGS_seed);
  config.pool_requests = absl::GetFlag(FLAGS_pool_requests);
  config.timeout = absl::GetFlag(FLAGS_timeout).value;
  absl::StatusOr<IdDistribution> distribution =
      ParseIdDistribution(absl::GetFlag(FLAGS_id_distribution));
  if (!distribution.ok()) {
    return Fail("bench", distribution.status());
  }
  config.distribution = *distribution;
  absl::StatusOr<std::optional<DataType>> dtype = DtypeFromFlag();
  if (!dtype.ok()) {
    return Fail("bench", dtype.status());
  }
  config.dtype = *dtype;
  if (const std::string size = absl::GetFlag(FLAGS_max_recv_message_size); !size.empty()) {
    absl::StatusOr<int64_t> bytes = ParseByteSize(size);
    if (!bytes.ok()) {
      return Fail("bench", bytes.status());
    }
    config.max_recv_message_bytes = *bytes;
  }
  if (const std::string path = absl::GetFlag(FLAGS_config); !path.empty()) {
    absl::StatusOr<GhzConfig> file = ReadGhzConfig(path);
    if (!file.ok()) {
      return Fail("bench", file.status());
    }
    if (absl::Status s = ApplyGhzConfig(*file, flags_given, &config); !s.ok()) {
      return Fail("bench", s);
    }
    config.target = TargetWithDefaultPort(config.target, kLookUpPort);  // the file's "host"
  }
  absl::StatusOr<BenchReport> report = RunBench(config);
  if (!report.ok()) {
    return Fail("bench", report.status());
  }
  std::cout << (absl::GetFlag(FLAGS_json) ? FormatBenchJson(*report) + "\n"
                                          : FormatBenchText(config, *report));
  std::cout.flush();
  if (const std::string failed = FailedCalls(*report); !failed.empty()) {
    std::cerr << "embedding-client bench: " << failed << "\n";
    return kCallsFailed;
  }
  return 0;
}

}  // namespace emb::client::cli
