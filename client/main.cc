// embedding-client: command-line client and load generator for embedding.v1.EmbeddingService.
// This file: the usage text, the command line's parsing and the dispatch to the commands
// (client/cli/commands.h).
#include <cstdint>
#include <iostream>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/flag.h"
#include "absl/flags/reflection.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "client/cli/commands.h"
#include "client/cli/common.h"
#include "client/cli/flags.h"
#include "client/embedding_client.h"
#include "service/common/flags_usage.h"

namespace emb::client::cli {
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
    "  lookup-features FEATURE...\n"
    "                   every feature of a batch of --batch_size samples in one call; a\n"
    "                   FEATURE is [NAME=]TABLE:IDS[:LENGTHS[:POOLING]] (comma-separated\n"
    "                   lists; no LENGTHS: one id a sample; POOLING none, sum or mean), e.g.\n"
    "                   --batch_size=2 lookup-features clicks=items:3,5,7:2,1:sum user=users:4,9\n"
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
  // --help lists the flags defined in flags.cc.
  std::vector<char*> positional =
      emb::service::ParseFlags(argc, argv, kUsage, "client/cli/flags.cc");
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
  if (!absl::GetFlag(FLAGS_shards).empty() && command != "lookup") {
    return Fail(command, absl::InvalidArgumentError("--shards is for lookup only"));
  }
  if (command == "lookup") {
    return LookUpCommand(args, *tls);
  }
  if (command == "lookup-features") {
    return FeaturesCommand(args, *tls);
  }
  if (command == "tables") {
    return TablesCommand(args, *tls);
  }
  if (command == "versions") {
    return VersionsCommand(args, *tls);
  }
  if (command == "health") {
    return HealthCommand(args, *tls);
  }
  std::cerr << "embedding-client: unknown command \"" << command << "\"\n\n" << kUsage;
  return 2;
}

}  // namespace
}  // namespace emb::client::cli

int main(int argc, char** argv) { return emb::client::cli::Main(argc, argv); }
