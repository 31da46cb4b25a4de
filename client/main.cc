// embedding-client: command-line client and load generator for embedding.v1.EmbeddingService.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/time.h"
#include "client/admin_client.h"
#include "client/bench.h"
#include "client/bench/ghz_config.h"
#include "client/embedding_client.h"
#include "client/npy_file.h"
#include "client/sharded_client.h"
#include "kernels/data_type.h"
#include "service/common/flags_usage.h"

namespace emb::client {
namespace {

// A duration flag that also takes plain seconds: "10" is "10s"; "500ms" and "1m" work too.
struct FlagDuration {
  absl::Duration value;
};

bool AbslParseFlag(absl::string_view text, FlagDuration* out, std::string* error) {
  double seconds;
  if (absl::SimpleAtod(text, &seconds) && std::isfinite(seconds)) {
    out->value = absl::Seconds(seconds);
    return true;
  }
  return absl::AbslParseFlag(text, &out->value, error);
}

std::string AbslUnparseFlag(FlagDuration d) { return absl::FormatDuration(d.value); }

}  // namespace
}  // namespace emb::client

using emb::client::FlagDuration;

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
ABSL_FLAG(bool, exact, false,
          "lookup: print each value with 9 significant digits (%.9g), enough to read back the "
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

namespace emb::client {
namespace {

constexpr char kUsage[] =
    "embedding-client [flags] COMMAND [ARGS]\n"
    "\n"
    "Commands:\n"
    "  lookup ID...     look up rows (or --ids_file); prints shape, dtype and one row per id\n"
    "                   (6 significant digits; --exact: 9, enough to round-trip a float32);\n"
    "                   negative ids go after --, e.g. lookup -- 3 -1 (before it, -1 reads as\n"
    "                   a flag; the server answers INVALID_ARGUMENT naming it);\n"
    "                   with --pooling=sum|mean one row per bag (--offsets, --lengths, or\n"
    "                   the last axis of --shape);\n"
    "                   with --shards, from a table split over servers (not pooled)\n"
    "  tables           list the server's tables (dtype int8_rowwise or int4_rowwise for a\n"
    "                   quantized one; bytes: what its rows take; where: device, or host+cache\n"
    "                   N rows for a GPU table in the host tier)\n"
    "  versions         each table's version (served: loaded or last saved; 0: not from a\n"
    "                   version directory), last applied update sequence and whether the\n"
    "                   version is pinned, one line a table\n"
    "  health [SERVICE] grpc.health.v1 Check; prints the status, exits 0 only if SERVING\n"
    "  update           overwrite rows through the admin listener (--admin_target): --ids and\n"
    "                   --rows name .npy files; prints each message's ack\n"
    "  replay           send the messages of the delta log --log=DIR whose sequence is above\n"
    "                   --table's (as ListTables on --target reports it) through the admin\n"
    "                   listener, in order; prints each ack and a summary; stops at a gap\n"
    "  save             write --table (empty: the default) as the next version of its version\n"
    "                   directory, through the admin listener; prints the version written\n"
    "  pin VERSION      serve VERSION of --table (empty: the default) from its version\n"
    "                   directory and pin it (a rollback: the server's polling leaves the table\n"
    "                   on it), through the admin listener; pin 0 serves the newest and unpins;\n"
    "                   prints the version served and whether it is pinned\n"
    "  unpin            the same as pin 0\n"
    "  bench            load generator; prints req/s, ids/s, payload MB/s, latency percentiles\n"
    "                   and status counts (--json: one JSON object)\n";

// The ports of a --target and an --admin_target that name none (TargetWithDefaultPort): the
// lookup port of the server's default --grpc_address, and the port of --admin_target's default.
constexpr int kLookUpPort = 50051;
constexpr int kAdminPort = 50052;

std::string LookUpTarget() {
  return TargetWithDefaultPort(absl::GetFlag(FLAGS_target), kLookUpPort);
}

std::string AdminTarget() {
  return TargetWithDefaultPort(absl::GetFlag(FLAGS_admin_target), kAdminPort);
}

absl::StatusOr<std::optional<DataType>> DtypeFromFlag() {
  const std::string name = absl::GetFlag(FLAGS_dtype);
  if (name.empty()) {
    return std::optional<DataType>();
  }
  DataType t;
  if (!ParseDataType(name.c_str(), &t) || !IsValueType(t)) {  // quantized types: tables only
    return absl::InvalidArgumentError(
        absl::StrCat("--dtype must be float32, float16 or bfloat16, got \"", name, "\""));
  }
  return std::optional<DataType>(t);
}

// The entries of a list flag (`flag`, e.g. "--offsets") as integers.
absl::StatusOr<std::vector<int64_t>> IntsFromFlag(absl::string_view flag,
                                                  const std::vector<std::string>& entries) {
  std::vector<int64_t> values;
  for (const std::string& e : entries) {
    int64_t v;
    if (!absl::SimpleAtoi(e, &v)) {
      return absl::InvalidArgumentError(absl::StrCat("bad ", flag, " entry \"", e, "\""));
    }
    values.push_back(v);
  }
  return values;
}

// Fills the pooling fields of `spec` from --pooling, --offsets, --lengths and --weights. Only
// their spelling is checked here; the server checks the bags (INVALID_ARGUMENT naming the
// problem).
absl::Status PoolingFromFlags(LookUpRequestSpec* spec) {
  if (const std::string name = absl::GetFlag(FLAGS_pooling);
      !name.empty() && !ParsePooling(name, &spec->pooling)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--pooling must be sum or mean, got \"", name, "\""));
  }
  absl::StatusOr<std::vector<int64_t>> offsets =
      IntsFromFlag("--offsets", absl::GetFlag(FLAGS_offsets));
  if (!offsets.ok()) {
    return offsets.status();
  }
  absl::StatusOr<std::vector<int64_t>> lengths =
      IntsFromFlag("--lengths", absl::GetFlag(FLAGS_lengths));
  if (!lengths.ok()) {
    return lengths.status();
  }
  spec->offsets = *std::move(offsets);
  spec->lengths = *std::move(lengths);
  for (const std::string& e : absl::GetFlag(FLAGS_weights)) {
    float w;
    if (!absl::SimpleAtof(e, &w)) {
      return absl::InvalidArgumentError(absl::StrCat("bad --weights entry \"", e, "\""));
    }
    spec->weights.push_back(w);
  }
  return absl::OkStatus();
}

absl::Status ParseIds(const std::vector<std::string>& tokens, std::vector<int64_t>* ids) {
  for (const std::string& token : tokens) {
    int64_t id;
    if (!absl::SimpleAtoi(token, &id)) {
      return absl::InvalidArgumentError(absl::StrCat("not an id: \"", token, "\""));
    }
    ids->push_back(id);
  }
  return absl::OkStatus();
}

absl::Status ReadIdsFile(const std::string& path, std::vector<int64_t>* ids) {
  std::ifstream in(path);
  if (!in) {
    return absl::NotFoundError(absl::StrCat("cannot open --ids_file ", path));
  }
  std::stringstream text;
  text << in.rdbuf();
  std::vector<std::string> tokens =
      absl::StrSplit(text.str(), absl::ByAnyChar(" \t\r\n,"), absl::SkipEmpty());
  return ParseIds(tokens, ids);
}

// The contents of the PEM file that `flag` names; empty for an empty path.
absl::StatusOr<std::string> ReadTlsFile(absl::string_view flag, const std::string& path) {
  if (path.empty()) {
    return std::string();
  }
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  if (in) {
    text << in.rdbuf();
  }
  if (!in || text.str().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, "=", path, ": cannot read it, or it is empty"));
  }
  return text.str();
}

// The values of one set of TLS flags (--tls* for --target, --admin_tls* for --admin_target).
struct TlsFlags {
  std::string prefix;  // "--tls" or "--admin_tls"
  bool tls = false;
  std::string ca;
  std::string cert;
  std::string key;
  std::string server_name;
};

// A channel's TLS settings from one set of flags; nullopt (plaintext) when none is given.
absl::StatusOr<std::optional<TlsOptions>> TlsFromFlags(const TlsFlags& flags) {
  TlsOptions tls;
  tls.server_name = flags.server_name;
  if (!flags.tls && flags.ca.empty() && flags.cert.empty() && flags.key.empty() &&
      tls.server_name.empty()) {
    return std::optional<TlsOptions>();
  }
  const std::string cert_flag = flags.prefix + "_cert";
  const std::string key_flag = flags.prefix + "_key";
  if (flags.cert.empty() != flags.key.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(flags.cert.empty() ? key_flag : cert_flag, " is given without ",
                     flags.cert.empty() ? cert_flag : key_flag, ": mutual TLS needs both"));
  }
  for (auto [flag, path, out] : {std::make_tuple(flags.prefix + "_ca", &flags.ca, &tls.root_certs),
                                 std::make_tuple(cert_flag, &flags.cert, &tls.cert_chain),
                                 std::make_tuple(key_flag, &flags.key, &tls.private_key)}) {
    absl::StatusOr<std::string> text = ReadTlsFile(flag, *path);
    if (!text.ok()) {
      return text.status();
    }
    *out = *std::move(text);
  }
  return std::optional<TlsOptions>(std::move(tls));
}

TlsFlags LookUpTlsFlags() {
  return {"--tls",
          absl::GetFlag(FLAGS_tls),
          absl::GetFlag(FLAGS_tls_ca),
          absl::GetFlag(FLAGS_tls_cert),
          absl::GetFlag(FLAGS_tls_key),
          absl::GetFlag(FLAGS_tls_server_name)};
}

TlsFlags AdminTlsFlags() {
  return {"--admin_tls",
          absl::GetFlag(FLAGS_admin_tls),
          absl::GetFlag(FLAGS_admin_tls_ca),
          absl::GetFlag(FLAGS_admin_tls_cert),
          absl::GetFlag(FLAGS_admin_tls_key),
          absl::GetFlag(FLAGS_admin_tls_server_name)};
}

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

int Fail(absl::string_view command, const absl::Status& status) {
  std::cerr << "embedding-client " << command << ": " << status << "\n";
  return 1;
}

// Fail for a call to --admin_target, naming it where it serves no admin service (AdminClient's
// UNIMPLEMENTED, whose message says where the admin service is).
int FailAdmin(absl::string_view command, const absl::Status& status) {
  if (status.code() != absl::StatusCode::kUnimplemented) {
    return Fail(command, status);
  }
  return Fail(command, absl::Status(status.code(), absl::StrCat("--admin_target=", AdminTarget(),
                                                                ": ", status.message())));
}

// One LookUp: EmbeddingClient's, or ShardedClient's over --shards.
using LookUpCall =
    absl::FunctionRef<absl::StatusOr<LookUpResult>(const LookUpRequestSpec&, absl::Duration)>;

int LookUpCommand(LookUpCall look_up, const std::vector<std::string>& args) {
  LookUpRequestSpec spec;
  spec.table = absl::GetFlag(FLAGS_table);
  if (absl::Status s = ParseIds(args, &spec.ids); !s.ok()) {
    return Fail("lookup", s);
  }
  if (const std::string path = absl::GetFlag(FLAGS_ids_file); !path.empty()) {
    if (absl::Status s = ReadIdsFile(path, &spec.ids); !s.ok()) {
      return Fail("lookup", s);
    }
  }
  for (const std::string& d : absl::GetFlag(FLAGS_shape)) {
    int64_t v;
    if (!absl::SimpleAtoi(d, &v)) {
      return Fail("lookup", absl::InvalidArgumentError(absl::StrCat("bad --shape entry ", d)));
    }
    spec.shape.push_back(v);
  }
  absl::StatusOr<std::optional<DataType>> dtype = DtypeFromFlag();
  if (!dtype.ok()) {
    return Fail("lookup", dtype.status());
  }
  spec.dtype = *dtype;
  if (absl::Status s = PoolingFromFlags(&spec); !s.ok()) {
    return Fail("lookup", s);
  }
  absl::StatusOr<LookUpResult> result = look_up(spec, absl::GetFlag(FLAGS_timeout).value);
  if (!result.ok()) {
    return Fail("lookup", result.status());
  }
  std::string out = absl::StrCat("shape [", absl::StrJoin(result->shape, ", "), "]\n", "dtype ",
                                 DataTypeName(result->dtype), "\n");
  const std::vector<float> values = result->ToFloat32();
  const int64_t dim = result->shape.back();
  // One line a row: "ID: values" for a row per id, "bag B: values" for a pooled bag.
  const bool pooled = spec.pooling != Pooling::kNone;
  const bool exact = absl::GetFlag(FLAGS_exact);
  for (size_t row = 0; dim > 0 && (row + 1) * dim <= values.size(); ++row) {
    if (pooled) {
      absl::StrAppend(&out, "bag ", row, ":");
    } else {
      absl::StrAppend(&out, row < spec.ids.size() ? absl::StrCat(spec.ids[row]) : "?", ":");
    }
    for (int64_t j = 0; j < dim; ++j) {
      if (exact) {
        absl::StrAppendFormat(&out, " %.9g", values[row * dim + j]);
      } else {
        absl::StrAppend(&out, " ", values[row * dim + j]);
      }
    }
    absl::StrAppend(&out, "\n");
  }
  std::cout << out;
  return 0;
}

int TablesCommand(EmbeddingClient& client) {
  absl::StatusOr<std::vector<TableInfo>> tables =
      client.ListTables(absl::GetFlag(FLAGS_timeout).value);
  if (!tables.ok()) {
    return Fail("tables", tables.status());
  }
  std::vector<std::vector<std::string>> cells = {{"NAME", "ROWS", "DIM", "DTYPE", "BYTES", "DEVICE",
                                                  "WHERE", "DEFAULT", "VERSION", "PINNED",
                                                  "SEQUENCE", "UPDATED_ROWS"}};
  for (const TableInfo& t : *tables) {
    // Where the rows are: on the device (host memory for the CPU), or in the host tier; and for
    // a shard, which of the whole table's rows it holds.
    std::string where = t.host_tier ? absl::StrCat("host+cache ", t.cache_rows, " rows") : "device";
    if (t.shard_count > 0) {
      absl::StrAppend(&where, " (shard ", t.shard_index, "/", t.shard_count, ": rows ", t.first_row,
                      "..", t.first_row + t.rows - 1, " of ", t.whole_rows, ")");
    }
    if (!t.parts.empty()) {  // several devices: "rows over cuda:0 0..499, cuda:1 500..999"
      absl::StrAppend(&where, " ", t.placement, " over");
      for (size_t k = 0; k < t.parts.size(); ++k) {
        absl::StrAppend(&where, k == 0 ? " " : ", ", t.parts[k].device, " ", t.parts[k].first_row,
                        "..", t.parts[k].first_row + t.parts[k].rows - 1);
      }
    }
    cells.push_back({t.name, absl::StrCat(t.rows), absl::StrCat(t.dim), DataTypeName(t.dtype),
                     absl::StrCat(t.bytes), t.device, where, t.is_default ? "yes" : "no",
                     absl::StrCat(t.version), t.version_pinned ? "yes" : "no",
                     absl::StrCat(t.sequence), absl::StrCat(t.updated_rows)});
  }
  std::vector<size_t> width(cells.front().size(), 0);
  for (const auto& row : cells) {
    for (size_t i = 0; i < row.size(); ++i) {
      width[i] = std::max(width[i], row[i].size());
    }
  }
  std::string out;
  for (const auto& row : cells) {
    for (size_t i = 0; i < row.size(); ++i) {
      absl::StrAppend(&out, row[i],
                      i + 1 < row.size() ? std::string(width[i] - row[i].size() + 2, ' ') : "\n");
    }
  }
  std::cout << out;
  return 0;
}

// One line a table: "table NAME version V sequence S pinned true|false", in ListTables' order
// (the default first).
int VersionsCommand(EmbeddingClient& client) {
  absl::StatusOr<std::vector<TableInfo>> tables =
      client.ListTables(absl::GetFlag(FLAGS_timeout).value);
  if (!tables.ok()) {
    return Fail("versions", tables.status());
  }
  std::string out;
  for (const TableInfo& t : *tables) {
    absl::StrAppend(&out, "table ", t.name, " version ", t.version, " sequence ", t.sequence,
                    " pinned ", t.version_pinned ? "true" : "false", "\n");
  }
  std::cout << out;
  return 0;
}

int HealthCommand(EmbeddingClient& client, const std::vector<std::string>& args) {
  if (args.size() > 1) {
    return Fail("health", absl::InvalidArgumentError("takes at most one service name"));
  }
  absl::StatusOr<std::string> status =
      client.CheckHealth(args.empty() ? "" : args[0], absl::GetFlag(FLAGS_timeout).value);
  if (!status.ok()) {
    return Fail("health", status.status());
  }
  std::cout << *status << "\n";
  return *status == "SERVING" ? 0 : 2;
}

// The ids of --ids: a 1-D .npy of int64 (or int32, widened); `name` ("--ids=PATH") in errors.
absl::StatusOr<std::vector<int64_t>> ReadIdsNpy(const std::string& path, absl::string_view name) {
  absl::StatusOr<NpyArray> array = ReadNpy(path);
  if (!array.ok()) {
    return array.status();
  }
  if (array->shape.size() != 1 || (array->descr != "<i8" && array->descr != "<i4")) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, " must be a 1-D array of int64 (or int32), not '", array->descr,
                     "' of shape (", absl::StrJoin(array->shape, ", "), ")"));
  }
  std::vector<int64_t> ids(array->shape[0]);
  for (size_t i = 0; i < ids.size(); ++i) {
    if (array->descr == "<i8") {
      std::memcpy(&ids[i], array->data.data() + 8 * i, 8);
    } else {
      int32_t v;
      std::memcpy(&v, array->data.data() + 4 * i, 4);
      ids[i] = v;
    }
  }
  return ids;
}

// The rows of --rows for `num_ids` ids, in the type they are sent in (--rows_dtype, else the
// file's), and their dim; `name` ("--rows=PATH") in errors.
struct RowsToSend {
  std::string bytes;
  DataType dtype = DataType::kFloat32;
  int64_t dim = 0;
};

absl::StatusOr<RowsToSend> ReadRowsNpy(const std::string& path, absl::string_view name,
                                       size_t num_ids) {
  absl::StatusOr<NpyArray> array = ReadNpy(path);
  if (!array.ok()) {
    return array.status();
  }
  const std::string send_name = absl::GetFlag(FLAGS_rows_dtype);
  std::optional<DataType> send;
  if (DataType t; !send_name.empty()) {
    if (!ParseDataType(send_name.c_str(), &t) || !IsValueType(t)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--rows_dtype must be float32, float16 or bfloat16, got \"", send_name, "\""));
    }
    send = t;
  }
  DataType file_type;
  if (array->descr == "<f4") {
    file_type = DataType::kFloat32;
  } else if (array->descr == "<f2") {
    file_type = DataType::kFloat16;
  } else if (send == DataType::kBFloat16 && (array->descr == "<u2" || array->descr == "<i2" ||
                                             array->descr == "|V2" || array->descr == "<V2")) {
    file_type = DataType::kBFloat16;  // the bits of bfloat16 values
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        name, " holds '", array->descr,
        "'; rows must be float32 (<f4) or float16 (<f2), or 2-byte bfloat16 bits (uint16 or "
        "ml_dtypes' bfloat16) with --rows_dtype=bfloat16"));
  }
  if (array->shape.size() != 2 || array->shape[0] != static_cast<int64_t>(num_ids)) {
    return absl::InvalidArgumentError(absl::StrCat(name, " must be 2-D with one row per id (",
                                                   num_ids, " ids), not of shape (",
                                                   absl::StrJoin(array->shape, ", "), ")"));
  }
  RowsToSend rows;
  rows.dim = array->shape[1];
  rows.dtype = send.value_or(file_type);
  if (rows.dtype == file_type) {
    rows.bytes = std::move(array->data);
    return rows;
  }
  std::vector<float> values(array->data.size() / ElementSize(file_type));
  for (size_t i = 0; i < values.size(); ++i) {
    values[i] = LoadAsFloat(array->data.data(), file_type, static_cast<int64_t>(i));
  }
  rows.bytes = EncodeRows(values, rows.dtype);
  return rows;
}

// `table` (empty: the default) as ListTables on --target reports it; `why` prefixes an error of
// the call.
absl::StatusOr<TableInfo> TableOnTarget(const std::string& table,
                                        const std::optional<TlsOptions>& tls,
                                        absl::string_view why) {
  absl::StatusOr<std::vector<TableInfo>> tables =
      EmbeddingClient::Connect(LookUpTarget(), tls)->ListTables(absl::GetFlag(FLAGS_timeout).value);
  if (!tables.ok()) {
    return absl::Status(tables.status().code(), absl::StrCat(why, tables.status().message()));
  }
  std::vector<std::string> names;
  for (const TableInfo& t : *tables) {
    if (table.empty() ? t.is_default : t.name == table) {
      return t;
    }
    names.push_back(t.name);
  }
  return absl::NotFoundError(
      absl::StrCat("--target has no table \"", table, "\"; it has: ", absl::StrJoin(names, ", ")));
}

// Where a stream's first sequence came from, when read from ListTables on --target (the admin
// service cannot report it): `table`'s sequence there.
struct SequenceSource {
  std::string table;
  int64_t sequence = 0;
};

// `status` of a stream whose sequences start one above `source`: a refused sequence
// (FAILED_PRECONDITION) says where the table's sequence was read, which may be another server
// than --admin_target's (issue 40: --target's default, with only --admin_target given).
absl::Status WithSequenceSource(const absl::Status& status,
                                const std::optional<SequenceSource>& source,
                                const std::set<std::string>& flags_given) {
  if (status.code() != absl::StatusCode::kFailedPrecondition || !source.has_value()) {
    return status;
  }
  return absl::Status(
      status.code(),
      absl::StrCat(status.message(), "; the first sequence sent, ", source->sequence + 1,
                   ", was one more than table ", source->table, "'s sequence ", source->sequence,
                   " as ListTables on --target=", LookUpTarget(),
                   flags_given.count("target") == 0 ? " (its default)" : "",
                   " reports it: if that is not the lookup address of the server of "
                   "--admin_target=",
                   AdminTarget(), ", give its lookup address as --target, or give --sequence"));
}

// The sequence the first message gets: --sequence, or one more than the table's last applied
// one as ListTables on --target reports it (then set in `source`).
absl::StatusOr<int64_t> FirstSequence(const std::string& table,
                                      const std::optional<TlsOptions>& tls,
                                      std::optional<SequenceSource>* source) {
  if (const int64_t sequence = absl::GetFlag(FLAGS_sequence); sequence != 0) {
    return sequence;
  }
  absl::StatusOr<TableInfo> info =
      TableOnTarget(table, tls,
                    absl::StrCat("reading the table's sequence from --target=", LookUpTarget(),
                                 " (give --sequence to skip it): "));
  if (!info.ok()) {
    return info.status();
  }
  *source = SequenceSource{info->name, info->sequence};
  return info->sequence + 1;
}

int UpdateCommand(const std::vector<std::string>& args, const std::optional<TlsOptions>& tls,
                  const std::set<std::string>& flags_given) {
  if (!args.empty()) {
    return Fail("update", absl::InvalidArgumentError("takes no arguments, only flags"));
  }
  const std::string ids_path = absl::GetFlag(FLAGS_ids);
  const std::string rows_path = absl::GetFlag(FLAGS_rows);
  if (ids_path.empty() || rows_path.empty()) {
    return Fail("update", absl::InvalidArgumentError("needs --ids and --rows (.npy files)"));
  }
  const int64_t per_message = absl::GetFlag(FLAGS_rows_per_message);
  if (per_message < 0) {
    return Fail("update", absl::InvalidArgumentError("--rows_per_message must be >= 0"));
  }
  absl::StatusOr<std::vector<int64_t>> ids = ReadIdsNpy(ids_path, absl::StrCat("--ids=", ids_path));
  if (!ids.ok()) {
    return Fail("update", ids.status());
  }
  absl::StatusOr<RowsToSend> rows =
      ReadRowsNpy(rows_path, absl::StrCat("--rows=", rows_path), ids->size());
  if (!rows.ok()) {
    return Fail("update", rows.status());
  }
  absl::StatusOr<std::optional<TlsOptions>> admin_tls = TlsFromFlags(AdminTlsFlags());
  if (!admin_tls.ok()) {
    return Fail("update", admin_tls.status());
  }
  const std::string table = absl::GetFlag(FLAGS_table);
  std::optional<SequenceSource> source;
  absl::StatusOr<int64_t> sequence = FirstSequence(table, tls, &source);
  if (!sequence.ok()) {
    return Fail("update", sequence.status());
  }
  std::unique_ptr<AdminClient> admin = AdminClient::Connect(AdminTarget(), *admin_tls);
  absl::StatusOr<std::unique_ptr<RowWriter>> writer =
      admin->OpenWriter(absl::GetFlag(FLAGS_timeout).value);
  if (!writer.ok()) {
    return Fail("update", writer.status());
  }
  // Every message is sent before the acks are read: the writer keeps a bounded number in
  // flight, and the acks of the messages applied before a refused one are printed all the same.
  const size_t n = ids->size();
  const size_t step = per_message > 0 ? static_cast<size_t>(per_message) : std::max<size_t>(n, 1);
  const size_t row_bytes = static_cast<size_t>(rows->dim) * ElementSize(rows->dtype);
  for (size_t begin = 0, k = 0; begin < std::max<size_t>(n, 1); begin += step, ++k) {
    const size_t end = std::min(n, begin + step);
    RowUpdate update;
    update.table = table;
    update.ids.assign(ids->data() + begin, ids->data() + end);
    update.rows = rows->bytes.substr(begin * row_bytes, (end - begin) * row_bytes);
    update.dtype = rows->dtype;
    update.sequence = *sequence + static_cast<int64_t>(k);
    if (!(*writer)->Send(update).ok()) {
      break;  // the stream has ended; Finish says why
    }
  }
  const absl::Status status = (*writer)->Finish();
  std::string out;
  while ((*writer)->unacknowledged() > 0) {
    absl::StatusOr<UpdateAck> ack = (*writer)->NextAck();
    if (!ack.ok()) {
      break;
    }
    absl::StrAppend(&out, "table ", ack->table, " sequence ", ack->sequence, " rows ", ack->rows,
                    "\n");
  }
  std::cout << out;
  std::cout.flush();
  if (!status.ok()) {
    return FailAdmin("update", WithSequenceSource(status, source, flags_given));
  }
  return 0;
}

// The messages of a delta log (replay --log): a directory of one table's messages, one per
// sequence number SEQ (decimal, > 0; leading zeros allowed), as SEQ.ids.npy and SEQ.rows.npy
// (what update's --ids and --rows take). A message is in the log once its ids file is: a
// publisher writes SEQ.rows.npy first, each file under another name (not ending in .ids.npy)
// then renamed. Other names are ignored. Maps each SEQ to "DIR/SEQ", the files' common prefix.
absl::StatusOr<std::map<int64_t, std::string>> ListDeltaLog(const std::string& dir) {
  std::error_code error;
  std::filesystem::directory_iterator it(dir, error);
  if (error) {
    return absl::NotFoundError(
        absl::StrCat("--log=", dir, ": cannot list the directory: ", error.message()));
  }
  std::map<int64_t, std::string> messages;
  for (; it != std::filesystem::directory_iterator(); it.increment(error)) {
    const std::string name = it->path().filename().string();
    absl::string_view seq_text = name;
    int64_t seq;
    if (!absl::ConsumeSuffix(&seq_text, ".ids.npy") || seq_text.empty() ||
        !std::all_of(seq_text.begin(), seq_text.end(),
                     [](char c) { return c >= '0' && c <= '9'; }) ||
        !absl::SimpleAtoi(seq_text, &seq) || seq <= 0) {
      continue;
    }
    const std::string prefix = (std::filesystem::path(dir) / std::string(seq_text)).string();
    if (auto [at, added] = messages.emplace(seq, prefix); !added) {
      return absl::InvalidArgumentError(absl::StrCat("--log=", dir, ": two files of message ", seq,
                                                     ": ", at->second, ".ids.npy and ", prefix,
                                                     ".ids.npy"));
    }
  }
  if (error) {
    return absl::InternalError(absl::StrCat("--log=", dir, ": listing it: ", error.message()));
  }
  return messages;
}

// The message of the delta log whose files start with `prefix`, as sequence `seq` of `table`.
absl::StatusOr<RowUpdate> ReadLogMessage(const std::string& prefix, const std::string& table,
                                         int64_t seq) {
  const std::string ids_path = prefix + ".ids.npy";
  const std::string rows_path = prefix + ".rows.npy";
  absl::StatusOr<std::vector<int64_t>> ids = ReadIdsNpy(ids_path, ids_path);
  if (!ids.ok()) {
    return ids.status();
  }
  absl::StatusOr<RowsToSend> rows = ReadRowsNpy(rows_path, rows_path, ids->size());
  if (!rows.ok()) {
    return rows.status();
  }
  RowUpdate update;
  update.table = table;
  update.ids = *std::move(ids);
  update.rows = std::move(rows->bytes);
  update.dtype = rows->dtype;
  update.sequence = seq;
  return update;
}

// replay: brings --table up to date from the delta log --log. Reads the table's sequence S from
// ListTables on --target, then sends the log's messages S+1, S+2, ... on one UpdateRows stream to
// --admin_target (many in flight), each with its SEQ as its sequence; prints one line per ack and
// "replayed N messages, sequences A..B; table T now at sequence B". A missing SEQ after S (the
// log lost a message) stops it before that one: the messages before it are sent, and it exits 1
// naming it. A log with nothing above S sends nothing and says so.
int ReplayCommand(const std::vector<std::string>& args, const std::optional<TlsOptions>& tls,
                  const std::set<std::string>& flags_given) {
  if (!args.empty()) {
    return Fail("replay", absl::InvalidArgumentError("takes no arguments, only flags"));
  }
  const std::string dir = absl::GetFlag(FLAGS_log);
  if (dir.empty()) {
    return Fail("replay", absl::InvalidArgumentError("needs --log=DIR, the delta log"));
  }
  absl::StatusOr<std::optional<TlsOptions>> admin_tls = TlsFromFlags(AdminTlsFlags());
  if (!admin_tls.ok()) {
    return Fail("replay", admin_tls.status());
  }
  absl::StatusOr<std::map<int64_t, std::string>> log = ListDeltaLog(dir);
  if (!log.ok()) {
    return Fail("replay", log.status());
  }
  const std::string table = absl::GetFlag(FLAGS_table);
  absl::StatusOr<TableInfo> info = TableOnTarget(
      table, tls,
      absl::StrCat("reading the table's sequence from --target=", LookUpTarget(), ": "));
  if (!info.ok()) {
    return Fail("replay", info.status());
  }
  const int64_t from = info->sequence;
  auto next = log->upper_bound(from);
  if (next == log->end()) {
    std::cout << absl::StrCat(
        "table ", info->name, " at sequence ", from, "; the log's newest message is ",
        log->empty() ? "none" : absl::StrCat(log->rbegin()->first), ": nothing to replay\n");
    return 0;
  }
  std::unique_ptr<AdminClient> admin = AdminClient::Connect(AdminTarget(), *admin_tls);
  absl::StatusOr<std::unique_ptr<RowWriter>> writer =
      admin->OpenWriter(absl::GetFlag(FLAGS_timeout).value);
  if (!writer.ok()) {
    return Fail("replay", writer.status());
  }
  // Each message is read just before it is sent; the writer keeps many in flight.
  absl::Status stopped;
  for (int64_t seq = from + 1; next != log->end(); ++next, ++seq) {
    if (next->first != seq) {
      stopped = absl::FailedPreconditionError(
          absl::StrCat("the log has no message ", seq, " (after ", seq - 1, " its next is ",
                       next->first, "): it lost a message; stopped before it"));
      break;
    }
    absl::StatusOr<RowUpdate> update = ReadLogMessage(next->second, table, seq);
    if (!update.ok()) {
      stopped = update.status();
      break;
    }
    if (!(*writer)->Send(*update).ok()) {
      break;  // the stream has ended; Finish says why
    }
  }
  const absl::Status status = (*writer)->Finish();
  std::string out;
  int64_t replayed = 0;
  int64_t first = 0;
  int64_t last = 0;
  while ((*writer)->unacknowledged() > 0) {
    absl::StatusOr<UpdateAck> ack = (*writer)->NextAck();
    if (!ack.ok()) {
      break;
    }
    absl::StrAppend(&out, "table ", ack->table, " sequence ", ack->sequence, " rows ", ack->rows,
                    "\n");
    first = replayed++ == 0 ? ack->sequence : first;
    last = ack->sequence;
  }
  if (replayed > 0) {
    absl::StrAppend(&out, "replayed ", replayed, " messages, sequences ", first, "..", last,
                    "; table ", info->name, " now at sequence ", last, "\n");
  }
  std::cout << out;
  std::cout.flush();
  if (!status.ok()) {
    return FailAdmin("replay",
                     WithSequenceSource(status, SequenceSource{info->name, from}, flags_given));
  }
  if (!stopped.ok()) {
    return Fail("replay", stopped);
  }
  return 0;
}

int SaveCommand(const std::vector<std::string>& args) {
  if (!args.empty()) {
    return Fail("save",
                absl::InvalidArgumentError("takes no arguments; name the table with --table"));
  }
  absl::StatusOr<std::optional<TlsOptions>> admin_tls = TlsFromFlags(AdminTlsFlags());
  if (!admin_tls.ok()) {
    return Fail("save", admin_tls.status());
  }
  absl::StatusOr<SavedVersion> saved =
      AdminClient::Connect(AdminTarget(), *admin_tls)
          ->SaveTable(absl::GetFlag(FLAGS_table), absl::GetFlag(FLAGS_timeout).value);
  if (!saved.ok()) {
    return FailAdmin("save", saved.status());
  }
  std::cout << absl::StrCat("table ", saved->table, " version ", saved->version, " sequence ",
                            saved->sequence, " path ", saved->path, " bytes ", saved->bytes, "\n");
  return 0;
}

// pin VERSION (unpin: `pin 0`): LoadVersion of --table through the admin listener; prints
// "table T version V sequence S pinned true|false".
int PinCommand(const std::string& command, const std::vector<std::string>& args) {
  int64_t version = 0;
  if (command == "unpin") {
    if (!args.empty()) {
      return Fail(command,
                  absl::InvalidArgumentError("takes no arguments; name the table with --table"));
    }
  } else if (args.size() != 1 || !absl::SimpleAtoi(args[0], &version) || version < 0) {
    return Fail(command, absl::InvalidArgumentError(
                             "takes one version number: 0 (the newest, unpinned) or a version "
                             "to serve and pin; name the table with --table"));
  }
  absl::StatusOr<std::optional<TlsOptions>> admin_tls = TlsFromFlags(AdminTlsFlags());
  if (!admin_tls.ok()) {
    return Fail(command, admin_tls.status());
  }
  absl::StatusOr<LoadedVersion> loaded =
      AdminClient::Connect(AdminTarget(), *admin_tls)
          ->LoadVersion(absl::GetFlag(FLAGS_table), version, absl::GetFlag(FLAGS_timeout).value);
  if (!loaded.ok()) {
    return FailAdmin(command, loaded.status());
  }
  std::cout << absl::StrCat("table ", loaded->table, " version ", loaded->version, " sequence ",
                            loaded->sequence, " pinned ", loaded->pinned ? "true" : "false", "\n");
  return 0;
}

// The names of the flags that `argv` sets ("--name", "--name=value", "-name", "--noname"), up to
// a "--"; read before parsing, so that a config file does not override a flag set to its default.
std::set<std::string> FlagsOnCommandLine(int argc, char** argv) {
  std::set<std::string> names;
  for (int i = 1; i < argc; ++i) {
    absl::string_view arg = argv[i];
    if (arg == "--") {
      break;
    }
    if (!absl::ConsumePrefix(&arg, "-")) {
      continue;
    }
    absl::ConsumePrefix(&arg, "-");
    const std::string name(arg.substr(0, arg.find('=')));
    names.insert(name);
    if (absl::StartsWith(name, "no")) {
      names.insert(name.substr(2));  // --noblocking sets "blocking"
    }
  }
  return names;
}

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

// Whether `arg` is a flag of ours that takes the next argument as its value ("--sequence 5"):
// not a bool, and given without "=".
bool TakesNextArgument(absl::string_view arg) {
  if (!absl::ConsumePrefix(&arg, "-")) {
    return false;
  }
  absl::ConsumePrefix(&arg, "-");
  if (arg.empty() || absl::StrContains(arg, '=')) {
    return false;
  }
  const absl::CommandLineFlag* flag = absl::FindCommandLineFlag(arg);
  return flag != nullptr && !flag->IsOfType<bool>();
}

// The first argument before any "--" that is a negative integer ("-1"), which Abseil would read as
// an unknown flag "1"; nullptr if none. The value of a flag ("--sequence -5") is not an id.
const char* NegativeIdBeforeDashDash(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const absl::string_view arg = argv[i];
    if (arg == "--") {
      break;
    }
    int64_t id;
    const bool value_of_option = i > 1 && TakesNextArgument(argv[i - 1]);
    if (arg.size() > 1 && arg[0] == '-' && absl::ascii_isdigit(arg[1]) &&
        absl::SimpleAtoi(arg, &id) && !value_of_option) {
      return argv[i];
    }
  }
  return nullptr;
}

int Main(int argc, char** argv) {
  if (const char* id = NegativeIdBeforeDashDash(argc, argv); id != nullptr) {
    std::cerr << "embedding-client: " << id << " would be read as a flag; put negative ids after "
              << "--, e.g. embedding-client lookup -- " << id << "\n";
    return 1;
  }
  const std::set<std::string> flags_given = FlagsOnCommandLine(argc, argv);
  std::vector<char*> positional = emb::service::ParseFlags(argc, argv, kUsage, "client/main.cc");
  if (positional.size() < 2) {
    std::cerr << kUsage;
    return 2;
  }
  const std::string command = positional[1];
  const std::vector<std::string> args(positional.begin() + 2, positional.end());
  absl::StatusOr<std::optional<TlsOptions>> tls = TlsFromFlags(LookUpTlsFlags());
  if (!tls.ok()) {
    return Fail(command, tls.status());
  }
  if (command == "bench") {
    return BenchCommand(args, *std::move(tls), flags_given);
  }
  if (command == "update") {
    return UpdateCommand(args, *tls, flags_given);
  }
  if (command == "replay") {
    return ReplayCommand(args, *tls, flags_given);
  }
  if (command == "save") {
    return SaveCommand(args);
  }
  if (command == "pin" || command == "unpin") {
    return PinCommand(command, args);
  }
  if (std::vector<std::string> shards = absl::GetFlag(FLAGS_shards); !shards.empty()) {
    for (std::string& shard : shards) {
      shard = TargetWithDefaultPort(shard, kLookUpPort);
    }
    if (command != "lookup") {
      return Fail(command, absl::InvalidArgumentError("--shards is for lookup only"));
    }
    absl::StatusOr<std::unique_ptr<ShardedClient>> sharded =
        ShardedClient::Connect(shards, ShardedClientOptions{*tls});
    if (!sharded.ok()) {
      return Fail(command, sharded.status());
    }
    return LookUpCommand([&](const LookUpRequestSpec& spec,
                             absl::Duration timeout) { return (*sharded)->LookUp(spec, timeout); },
                         args);
  }
  std::unique_ptr<EmbeddingClient> client = EmbeddingClient::Connect(LookUpTarget(), *tls);
  if (command == "lookup") {
    return LookUpCommand([&](const LookUpRequestSpec& spec,
                             absl::Duration timeout) { return client->LookUp(spec, timeout); },
                         args);
  }
  if (command == "tables") {
    if (!args.empty()) {
      return Fail("tables", absl::InvalidArgumentError("takes no arguments"));
    }
    return TablesCommand(*client);
  }
  if (command == "versions") {
    if (!args.empty()) {
      return Fail("versions", absl::InvalidArgumentError("takes no arguments"));
    }
    return VersionsCommand(*client);
  }
  if (command == "health") {
    return HealthCommand(*client, args);
  }
  std::cerr << "embedding-client: unknown command \"" << command << "\"\n\n" << kUsage;
  return 2;
}

}  // namespace
}  // namespace emb::client

int main(int argc, char** argv) { return emb::client::Main(argc, argv); }
