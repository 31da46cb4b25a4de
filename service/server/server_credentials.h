// The gRPC port's credentials: plaintext, TLS, or mutual TLS, from PEM files named by the
// server's --tls_cert, --tls_key and --tls_client_ca flags. Every file is read and checked here,
// before any port opens, so that a bad one stops start-up with a message naming its flag.
// Thread-compatible (no shared state).
#ifndef EMB_SERVICE_SERVER_SERVER_CREDENTIALS_H_
#define EMB_SERVICE_SERVER_SERVER_CREDENTIALS_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "grpcpp/security/server_credentials.h"

namespace emb::service {

struct GrpcPortCredentials {
  std::shared_ptr<grpc::ServerCredentials> credentials;
  // For the start-up log: "plaintext", "TLS (...)" or "mutual TLS (...)".
  std::string description;
};

// Empty `cert_path` and `key_path` (and `client_ca_path`): insecure credentials. Both given: TLS
// with that certificate chain and key. `client_ca_path` as well: mutual TLS, every client must
// present a certificate that chains to a CA in that file
// (GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY).
// INVALID_ARGUMENT, naming the flag and the problem, if only one of cert and key is given, a
// client CA without them, or a file that cannot be read, holds no PEM certificate (or
// unencrypted private key), or a key that does not match the certificate.
// The flags the files came from, for messages.
struct TlsFlagNames {
  const char* cert = "--tls_cert";
  const char* key = "--tls_key";
  const char* client_ca = "--tls_client_ca";
};

absl::StatusOr<GrpcPortCredentials> MakeGrpcPortCredentials(const std::string& cert_path,
                                                            const std::string& key_path,
                                                            const std::string& client_ca_path,
                                                            const TlsFlagNames& flags = {});

}  // namespace emb::service

#endif  // EMB_SERVICE_SERVER_SERVER_CREDENTIALS_H_
