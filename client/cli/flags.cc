// embedding-client's flags; --help lists the flags of this file (main.cc: ParseFlags).
#include "client/cli/flags.h"

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace emb::client::cli {

bool AbslParseFlag(absl::string_view text, FlagDuration* out, std::string* error) {
  double seconds;
  if (absl::SimpleAtod(text, &seconds) && std::isfinite(seconds)) {
    out->value = absl::Seconds(seconds);
    return true;
  }
  return absl::AbslParseFlag(text, &out->value, error);
}

std::string AbslUnparseFlag(FlagDuration d) { return absl::FormatDuration(d.value); }

}  // namespace emb::client::cli

using emb::client::cli::FlagDuration;

ABSL_FLAG(std::string, target, "localhost:50051",
          "Server address, host:port; a host without a port means port 50051 (gRPC alone would "
          "dial 443).");
ABSL_FLAG(std::vector<std::string>, shards, {},
          "lookup: the targets of a sharded table's servers (--shard=K/N), shard 0 first, "
          "e.g. dns:///emb-shard-0.ns.svc:50051,dns:///emb-shard-1.ns.svc:50051; each shard's "
          "replicas are balanced round_robin and UNAVAILABLE is retried. Replaces --target.");
ABSL_FLAG(
    FlagDuration, timeout, FlagDuration{absl::Seconds(5)},
    "Deadline of each call (update, replay: of its whole stream; save: of the whole write, and "
    "pin: of the whole load, which for a large table want more): seconds, or a duration "
    "such as 500ms.");
ABSL_FLAG(bool, tls, false,
          "Speak TLS to the server (implied by any --tls_* flag); without --tls_ca the server's "
          "certificate must chain to gRPC's default roots.");
ABSL_FLAG(std::string, tls_ca, "",
          "PEM CA certificate(s) that the server's certificate must be signed by (turns TLS on).");
ABSL_FLAG(std::string, tls_cert, "",
          "Mutual TLS: PEM certificate (chain) of this client, with --tls_key.");
ABSL_FLAG(std::string, tls_key, "", "Mutual TLS: PEM private key of --tls_cert.");
ABSL_FLAG(std::string, tls_server_name, "",
          "Name the server's certificate must carry, instead of --target's host.");
ABSL_FLAG(
    std::string, admin_target, "localhost:50052",
    "update, replay, save, pin: address of the server's admin listener (its --admin_address), "
    "host:port; a host without a port means port 50052. A server's lookup port (--target) "
    "serves no admin service.");
ABSL_FLAG(
    bool, admin_tls, false,
    "update, replay, save, pin: speak TLS to --admin_target (implied by any --admin_tls_* flag); "
    "without --admin_tls_ca its certificate must chain to gRPC's default roots. None of "
    "them: plaintext, which a server allows only with --admin_insecure on a loopback "
    "address.");
ABSL_FLAG(std::string, admin_tls_ca, "",
          "update, replay, save, pin: PEM CA certificate(s) that the admin listener's certificate "
          "must be signed by (turns TLS on).");
ABSL_FLAG(std::string, admin_tls_cert, "",
          "update, replay, save, pin: PEM certificate (chain) of this client for the admin "
          "listener's mutual TLS (its identity must be on the server's "
          "--admin_allowed_identities), with --admin_tls_key.");
ABSL_FLAG(std::string, admin_tls_key, "",
          "update, replay, save, pin: PEM private key of --admin_tls_cert.");
ABSL_FLAG(std::string, admin_tls_server_name, "",
          "update, replay, save, pin: name the admin listener's certificate must carry, instead of "
          "--admin_target's host.");
ABSL_FLAG(std::string, table, "", "Table name; empty selects the server's default table.");
ABSL_FLAG(std::string, dtype, "",
          "Answer type: float32, float16 or bfloat16; empty means the table's own type (float32 "
          "for a quantized table).");
// lookup
ABSL_FLAG(std::string, ids_file, "",
          "lookup: read the ids from this file (separated by whitespace or commas).");
ABSL_FLAG(std::vector<std::string>, shape, {},
          "lookup: shape of the ids, e.g. 4,8; empty means [number of ids].");
ABSL_FLAG(std::string, pooling, "",
          "lookup: sum or mean: one row per bag of ids, the sum or mean of its rows; the bags are "
          "--offsets or --lengths, else the last axis of --shape. Empty: one row per id.");
ABSL_FLAG(std::vector<std::string>, offsets, {},
          "lookup, with --pooling: CSR offsets of the bags into the ids, e.g. 0,3,5 (bags + 1 "
          "values, the first 0, the last the number of ids).");
ABSL_FLAG(std::vector<std::string>, lengths, {},
          "lookup, with --pooling: the number of ids of each bag, e.g. 3,2 (instead of "
          "--offsets).");
ABSL_FLAG(int64_t, batch_size, 1,
          "lookup-features: the samples of the batch; each feature holds a bag of ids a sample.");
ABSL_FLAG(bool, exact, false,
          "lookup, lookup-features: print each value with 9 significant digits (%.9g), enough to "
          "read back the "
          "same float32, instead of 6.");
ABSL_FLAG(std::vector<std::string>, weights, {},
          "lookup, with --pooling=sum: one weight per id, e.g. 0.5,1,2; each row is multiplied "
          "by its id's weight.");
// update, replay
ABSL_FLAG(std::string, ids, "", "update: .npy file of the ids to overwrite, 1-D int64 (or int32).");
ABSL_FLAG(std::string, rows, "",
          "update: .npy file of their rows, 2-D [len(ids), dim], float32 or float16 (or 2-byte "
          "bfloat16 bits, uint16 or ml_dtypes' bfloat16, with --rows_dtype=bfloat16).");
ABSL_FLAG(
    std::string, rows_dtype, "",
    "update, replay: type the rows are sent in: float32, float16 or bfloat16 (converted from the "
    "file's, rounding to nearest even); empty: the file's own type.");
ABSL_FLAG(int64_t, sequence, 0,
          "update: sequence number of the (first) message; it must be greater than the table's "
          "last applied one. 0: one more than the table's sequence as ListTables on --target "
          "reports it (for a single publisher; --target must then be the lookup address of the "
          "server of --admin_target, whose admin service cannot report it).");
ABSL_FLAG(int64_t, rows_per_message, 0,
          "update: if > 0, send the rows in messages of at most this many, on one stream, with "
          "sequences --sequence, --sequence + 1, ...; 0: one message.");
ABSL_FLAG(std::string, log, "",
          "replay: the delta log of --table, a directory of messages SEQ.ids.npy and "
          "SEQ.rows.npy (as --ids and --rows), one per sequence number SEQ.");
// bench
ABSL_FLAG(int32_t, concurrency, 1, "bench: calls kept in flight (closed loop).");
ABSL_FLAG(bool, blocking, false,
          "bench, closed loop: one thread per slot making blocking calls, instead of callbacks; "
          "fewer thread hand-offs, so lower latency at low concurrency (at most 1024 slots).");
ABSL_FLAG(int32_t, connections, 1, "bench: channels, each its own TCP connection.");
ABSL_FLAG(double, rps, 0,
          "bench: if > 0, open loop: start calls at this fixed rate and measure latency from "
          "each call's scheduled start.");
ABSL_FLAG(int32_t, max_inflight, 4096,
          "bench, open loop: most calls in flight; a call waiting for a slot counts the wait.");
ABSL_FLAG(FlagDuration, duration, FlagDuration{absl::Seconds(10)},
          "bench: length of the measured phase (ignored when --requests > 0).");
ABSL_FLAG(int64_t, requests, 0, "bench: if > 0, measure exactly this many calls.");
ABSL_FLAG(FlagDuration, warmup, FlagDuration{absl::Seconds(1)},
          "bench: run this long at the same load first, not recorded.");
ABSL_FLAG(int64_t, ids_per_request, 16, "bench: ids in each LookUp.");
ABSL_FLAG(std::string, id_distribution, "uniform",
          "bench: uniform or zipf, over the table's rows (read from ListTables).");
ABSL_FLAG(double, zipf_exponent, 1.0, "bench: exponent s of --id_distribution=zipf.");
ABSL_FLAG(uint64_t, seed, 1, "bench: seed of the id generator.");
ABSL_FLAG(int64_t, pool_requests, 0,
          "bench: requests made before the run and sent in turn; 0: enough for 65,536 ids (16 to "
          "4,096 requests, at most 8M ids). More than a run (warm-up included) sends: every "
          "call's ids fresh, which a cache under test cannot learn by replay.");
ABSL_FLAG(bool, json, false, "bench: print one JSON object instead of text.");
ABSL_FLAG(std::string, config, "",
          "bench: a ghz config file (JSON, deploy/loadtest/): its call data, concurrency, "
          "connections, rps, total or duration, timeout, max-recv-message-size and host; flags "
          "given on the command line override it, as in ghz.");
ABSL_FLAG(std::string, max_recv_message_size, "",
          "bench: largest answer accepted, e.g. 4194304, 64MB or 64MiB; larger answers fail "
          "with RESOURCE_EXHAUSTED. Empty: no limit (with --config: the file's, else none, as in "
          "ghz 0.121.0).");
