// embedding-client's flags (defined in flags.cc; --help lists those of that file), and the type
// of its duration flags.
#ifndef EMB_CLIENT_CLI_FLAGS_H_
#define EMB_CLIENT_CLI_FLAGS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/flags/declare.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace emb::client::cli {

// A duration flag that also takes plain seconds: "10" is "10s"; "500ms" and "1m" work too.
struct FlagDuration {
  absl::Duration value;
};

bool AbslParseFlag(absl::string_view text, FlagDuration* out, std::string* error);
std::string AbslUnparseFlag(FlagDuration d);

}  // namespace emb::client::cli

ABSL_DECLARE_FLAG(std::string, target);
ABSL_DECLARE_FLAG(std::vector<std::string>, shards);
ABSL_DECLARE_FLAG(emb::client::cli::FlagDuration, timeout);
ABSL_DECLARE_FLAG(bool, tls);
ABSL_DECLARE_FLAG(std::string, tls_ca);
ABSL_DECLARE_FLAG(std::string, tls_cert);
ABSL_DECLARE_FLAG(std::string, tls_key);
ABSL_DECLARE_FLAG(std::string, tls_server_name);
ABSL_DECLARE_FLAG(std::string, admin_target);
ABSL_DECLARE_FLAG(bool, admin_tls);
ABSL_DECLARE_FLAG(std::string, admin_tls_ca);
ABSL_DECLARE_FLAG(std::string, admin_tls_cert);
ABSL_DECLARE_FLAG(std::string, admin_tls_key);
ABSL_DECLARE_FLAG(std::string, admin_tls_server_name);
ABSL_DECLARE_FLAG(std::string, table);
ABSL_DECLARE_FLAG(std::string, dtype);
// lookup
ABSL_DECLARE_FLAG(std::string, ids_file);
ABSL_DECLARE_FLAG(std::vector<std::string>, shape);
ABSL_DECLARE_FLAG(std::string, pooling);
ABSL_DECLARE_FLAG(std::vector<std::string>, offsets);
ABSL_DECLARE_FLAG(std::vector<std::string>, lengths);
ABSL_DECLARE_FLAG(int64_t, batch_size);
ABSL_DECLARE_FLAG(bool, exact);
ABSL_DECLARE_FLAG(std::vector<std::string>, weights);
// update, replay
ABSL_DECLARE_FLAG(std::string, ids);
ABSL_DECLARE_FLAG(std::string, rows);
ABSL_DECLARE_FLAG(std::string, rows_dtype);
ABSL_DECLARE_FLAG(int64_t, sequence);
ABSL_DECLARE_FLAG(int64_t, rows_per_message);
ABSL_DECLARE_FLAG(std::string, log);
// bench
ABSL_DECLARE_FLAG(int32_t, concurrency);
ABSL_DECLARE_FLAG(bool, blocking);
ABSL_DECLARE_FLAG(int32_t, connections);
ABSL_DECLARE_FLAG(double, rps);
ABSL_DECLARE_FLAG(int32_t, max_inflight);
ABSL_DECLARE_FLAG(emb::client::cli::FlagDuration, duration);
ABSL_DECLARE_FLAG(int64_t, requests);
ABSL_DECLARE_FLAG(emb::client::cli::FlagDuration, warmup);
ABSL_DECLARE_FLAG(int64_t, ids_per_request);
ABSL_DECLARE_FLAG(std::string, id_distribution);
ABSL_DECLARE_FLAG(double, zipf_exponent);
ABSL_DECLARE_FLAG(uint64_t, seed);
ABSL_DECLARE_FLAG(int64_t, pool_requests);
ABSL_DECLARE_FLAG(bool, json);
ABSL_DECLARE_FLAG(std::string, config);
ABSL_DECLARE_FLAG(std::string, max_recv_message_size);

#endif  // EMB_CLIENT_CLI_FLAGS_H_
