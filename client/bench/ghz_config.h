// ghz configuration files (JSON), read so that `embedding-client bench --config FILE` runs the
// scenario that `ghz --config FILE` runs: the same call data (call_data.h), concurrency,
// connections, rate, length, deadline and receive limit. deploy/loadtest/ holds ours.
//
// Keys that shape the load and that bench cannot reproduce (async, step or line schedules,
// data or binary files, max-duration, skipFirst, ...) are refused, as are unknown keys, so a
// scenario never runs differently from what its file says. Keys that only label or route the
// output (name, tags, format, output, proto, ...) are accepted and ignored.
#ifndef EMB_CLIENT_BENCH_GHZ_CONFIG_H_
#define EMB_CLIENT_BENCH_GHZ_CONFIG_H_

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "client/bench/config.h"

namespace emb::client {

// The call bench makes, in both of ghz's spellings.
inline constexpr absl::string_view kLookUpCall = "embedding.v1.EmbeddingService/LookUp";

// A ghz config; absent keys hold ghz's defaults.
struct GhzConfig {
  std::string call;
  std::string host;  // empty: not in the file
  bool insecure = false;
  std::string cacert;
  std::string cert;
  std::string key;
  std::string cname;
  int64_t total = 200;   // -n; ignored when duration > 0
  int concurrency = 50;  // -c
  int connections = 1;
  double rps = 0;                                  // 0: no rate limit
  absl::Duration duration = absl::ZeroDuration();  // -z
  absl::Duration timeout = absl::Seconds(20);      // -t
  // -1: no limit. ghz 0.121.0 sets none unless told (grpc-go's own default of 4 MiB does not
  // apply to it: a 6.3 MB answer passes).
  int64_t max_recv_message_bytes = -1;
  // The call data: one JSON object per message, used in turn (ghz takes an object or an array).
  std::vector<std::string> data;
};

// Parses the text of a config file. INVALID_ARGUMENT naming the key for a wrong type, an
// unknown or unsupported key, a call other than kLookUpCall, or no data.
absl::StatusOr<GhzConfig> ParseGhzConfig(absl::string_view json);
// ParseGhzConfig of the file at `path`; NOT_FOUND if it can't be read. Errors name the file.
absl::StatusOr<GhzConfig> ReadGhzConfig(const std::string& path);

// A byte size as ghz takes it (go-humanize): "4194304", "64MB" (10^6), "64 MiB" (2^20), "1.5GB";
// units B, kB/KB/K, MB/M, GB/G, KiB, MiB, GiB, case-insensitive. INVALID_ARGUMENT otherwise.
absl::StatusOr<int64_t> ParseByteSize(absl::string_view text);

// Sets `config` from `file`, except what `flags_given` (bench flag names without dashes, e.g.
// "concurrency") says the command line set, as ghz merges its command line over a config file:
// target (host), concurrency, connections, rps (an open loop, at most concurrency in flight, as
// in ghz), requests (total) or duration, timeout, max_recv_message_size, TLS (insecure, or
// cacert/cert/key/cname, read here) and the call data. ghz has no warm-up: warmup becomes 0
// unless given. INVALID_ARGUMENT if ids_per_request, id_distribution or zipf_exponent were given
// (the ids come from the call data), or a TLS file can't be read.
absl::Status ApplyGhzConfig(const GhzConfig& file, const std::set<std::string>& flags_given,
                            BenchConfig* config);

}  // namespace emb::client

#endif  // EMB_CLIENT_BENCH_GHZ_CONFIG_H_
