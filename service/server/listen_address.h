// The --grpc_address and --metrics_address flags: HOST:PORT, split once.
#ifndef EMB_SERVICE_SERVER_LISTEN_ADDRESS_H_
#define EMB_SERVICE_SERVER_LISTEN_ADDRESS_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace emb::service {

struct ListenAddress {
  std::string host;  // as given: "0.0.0.0", "[::1]", "localhost"; may be empty (every address)
  int port = 0;      // 0: any free port
};

// HOST:PORT with a port in [0, 65535]; INVALID_ARGUMENT naming `flag` otherwise.
absl::StatusOr<ListenAddress> ParseListenAddress(absl::string_view flag, absl::string_view address);

// Why `address` cannot be bound, asked of the OS before gRPC and the metrics exposer try (and
// after gRPC failed to): a busy port or a foreign address reads better than gRPC's multi-line
// "cannot listen" or civetweb's "null context". Empty if the OS sees no reason.
std::string WhyCannotBind(const ListenAddress& address);

// Whether `host` (a ListenAddress's) is a literal loopback address: an IPv4 address in
// 127.0.0.0/8 in dotted-decimal form, the IPv6 loopback address (bracketed or not, in any of its
// spellings), or the name "localhost" itself. A name that only resolves to loopback (or only
// starts "127.", as "127.example.com" does) is not: what it resolves to can change.
bool IsLoopbackHost(absl::string_view host);

}  // namespace emb::service

#endif  // EMB_SERVICE_SERVER_LISTEN_ADDRESS_H_
