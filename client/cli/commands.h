// embedding-client's commands, one function each (main.cc dispatches to them). Each takes the
// command's arguments after its name, reads its flags (flags.h), prints its answer on stdout and
// any failure on stderr, and returns the process's exit status.
#ifndef EMB_CLIENT_CLI_COMMANDS_H_
#define EMB_CLIENT_CLI_COMMANDS_H_

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "client/embedding_client.h"

namespace emb::client::cli {

// lookup ID...: the rows of the ids, one per id or per bag (--pooling); --shards: sharded.
int LookUpCommand(const std::vector<std::string>& args, const std::optional<TlsOptions>& tls);

// lookup-features FEATURE...: every feature of --batch_size samples in one call.
int FeaturesCommand(const std::vector<std::string>& args, const std::optional<TlsOptions>& tls);

// tables: a table of the server's tables, one row each.
int TablesCommand(const std::vector<std::string>& args, const std::optional<TlsOptions>& tls);

// versions: each table's version, sequence and whether it is pinned, one line a table.
int VersionsCommand(const std::vector<std::string>& args, const std::optional<TlsOptions>& tls);

// health [SERVICE]: the status of grpc.health.v1 Check; exits 0 only if SERVING.
int HealthCommand(const std::vector<std::string>& args, const std::optional<TlsOptions>& tls);

// update: overwrites the rows of --ids with --rows through the admin listener.
int UpdateCommand(const std::vector<std::string>& args, const std::optional<TlsOptions>& tls,
                  const std::set<std::string>& flags_given);

// replay: sends the delta log --log above --table's sequence through the admin listener.
int ReplayCommand(const std::vector<std::string>& args, const std::optional<TlsOptions>& tls,
                  const std::set<std::string>& flags_given);

// save: --table as the next version of its version directory, through the admin listener.
int SaveCommand(const std::vector<std::string>& args);

// pin VERSION, unpin (`command`): serves and pins a version of --table, or unpins it.
int PinCommand(const std::string& command, const std::vector<std::string>& args);

// bench: the load generator; flags on the command line (`flags_given`) override --config's.
int BenchCommand(const std::vector<std::string>& args, std::optional<TlsOptions> tls,
                 const std::set<std::string>& flags_given);

}  // namespace emb::client::cli

#endif  // EMB_CLIENT_CLI_COMMANDS_H_
