// What several of embedding-client's commands share: the servers' addresses, --dtype, the TLS
// flags and the reporting of a failure.
#ifndef EMB_CLIENT_CLI_COMMON_H_
#define EMB_CLIENT_CLI_COMMON_H_

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "client/embedding_client.h"
#include "kernels/data_type.h"

namespace emb::client::cli {

// The ports of a --target and an --admin_target that name none (TargetWithDefaultPort): the
// lookup port of the server's default --grpc_address, and the port of --admin_target's default.
inline constexpr int kLookUpPort = 50051;
inline constexpr int kAdminPort = 50052;

// --target and --admin_target, with their default ports where they name none.
std::string LookUpTarget();
std::string AdminTarget();

// --dtype: nullopt when empty (the table's own type); INVALID_ARGUMENT unless a value type.
absl::StatusOr<std::optional<DataType>> DtypeFromFlag();

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
absl::StatusOr<std::optional<TlsOptions>> TlsFromFlags(const TlsFlags& flags);

// The --tls* flags (for --target) and the --admin_tls* flags (for --admin_target).
TlsFlags LookUpTlsFlags();
TlsFlags AdminTlsFlags();

// Prints "embedding-client COMMAND: STATUS" on stderr; returns 1, the exit status.
int Fail(absl::string_view command, const absl::Status& status);

// Fail for a call to --admin_target, naming it where it serves no admin service (AdminClient's
// UNIMPLEMENTED, whose message says where the admin service is).
int FailAdmin(absl::string_view command, const absl::Status& status);

}  // namespace emb::client::cli

#endif  // EMB_CLIENT_CLI_COMMON_H_
