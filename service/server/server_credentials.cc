#include "service/server/server_credentials.h"

#include <openssl/asn1.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "grpc/grpc_security_constants.h"
#include "grpcpp/security/server_credentials.h"
#include "service/common/regular_file.h"
#include "service/common/status_macros.h"

namespace emb::service {
namespace {

struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct X509Free {
  void operator()(X509* x) const { X509_free(x); }
};
struct PkeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
using BioPtr = std::unique_ptr<BIO, BioFree>;
using X509Ptr = std::unique_ptr<X509, X509Free>;
using PkeyPtr = std::unique_ptr<EVP_PKEY, PkeyFree>;

// "FLAG=PATH: " for error messages.
std::string Where(absl::string_view flag, const std::string& path) {
  return absl::StrCat(flag, "=", path, ": ");
}

// OpenSSL's reason for the last failure on this thread, and an empty error queue after, so that
// nothing of ours is left for gRPC's own OpenSSL calls to find.
std::string TakeOpenSslError() {
  const unsigned long code = ERR_peek_last_error();  // NOLINT(google-runtime-int): OpenSSL's type
  const char* reason = code != 0 ? ERR_reason_error_string(code) : nullptr;
  ERR_clear_error();
  return reason != nullptr ? absl::StrCat(" (", reason, ")") : "";
}

// The most bytes of a PEM file (a certificate chain or a CA bundle is far smaller).
constexpr size_t kMaxPemFileBytes = size_t{1} << 20;

// A PEM file named by `flag`: a regular file (a FIFO or /dev/zero is refused at once) of at most
// kMaxPemFileBytes, not empty.
absl::StatusOr<std::string> ReadFile(absl::string_view flag, const std::string& path) {
  absl::StatusOr<std::string> text = ReadRegularFile(path, kMaxPemFileBytes);
  if (!text.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(flag, "=", text.status().message()));
  }
  if (text->empty()) {
    return absl::InvalidArgumentError(absl::StrCat(Where(flag, path), "empty file"));
  }
  return text;
}

// OK while `cert` is valid now; else INVALID_ARGUMENT saying when it expired or starts to be
// valid: every client would refuse the handshake, so the server does not start with it.
absl::Status CheckValidNow(absl::string_view flag, const std::string& path, X509* cert) {
  auto when = [](const ASN1_TIME* t) {
    BioPtr bio(BIO_new(BIO_s_mem()));
    ASN1_TIME_print(bio.get(), t);
    char* data = nullptr;
    const long n = BIO_get_mem_data(bio.get(), &data);  // NOLINT(google-runtime-int): OpenSSL's
    return std::string(data, static_cast<size_t>(n));
  };
  if (X509_cmp_current_time(X509_get0_notAfter(cert)) < 0) {
    return absl::InvalidArgumentError(absl::StrCat(Where(flag, path), "the certificate expired on ",
                                                   when(X509_get0_notAfter(cert)),
                                                   "; clients would refuse it"));
  }
  if (X509_cmp_current_time(X509_get0_notBefore(cert)) > 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(Where(flag, path), "the certificate is not valid until ",
                     when(X509_get0_notBefore(cert)), "; clients would refuse it"));
  }
  return absl::OkStatus();
}

BioPtr MemoryBio(const std::string& text) {
  return BioPtr(BIO_new_mem_buf(text.data(), static_cast<int>(text.size())));
}

// The first certificate in PEM `text`; INVALID_ARGUMENT if there is none.
absl::StatusOr<X509Ptr> FirstCertificate(absl::string_view flag, const std::string& path,
                                         const std::string& text) {
  BioPtr bio = MemoryBio(text);
  X509Ptr cert(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
  if (cert == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(Where(flag, path), "no PEM certificate in it", TakeOpenSslError()));
  }
  return cert;
}

// Refuses encrypted keys instead of asking for a passphrase on the terminal.
int NoPassphrase(char* /*buf*/, int /*size*/, int /*rwflag*/, void* /*userdata*/) { return -1; }

absl::StatusOr<PkeyPtr> PrivateKey(absl::string_view flag, const std::string& path,
                                   const std::string& text) {
  BioPtr bio = MemoryBio(text);
  PkeyPtr key(PEM_read_bio_PrivateKey(bio.get(), nullptr, NoPassphrase, nullptr));
  if (key == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        Where(flag, path), "no unencrypted PEM private key in it", TakeOpenSslError()));
  }
  return key;
}

std::string Subject(X509* cert) {
  char name[256];
  X509_NAME_oneline(X509_get_subject_name(cert), name, sizeof(name));
  return name;
}

}  // namespace

absl::StatusOr<GrpcPortCredentials> MakeGrpcPortCredentials(const std::string& cert_path,
                                                            const std::string& key_path,
                                                            const std::string& client_ca_path,
                                                            const TlsFlagNames& flags) {
  if (cert_path.empty() && key_path.empty()) {
    if (!client_ca_path.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(flags.client_ca, " needs ", flags.cert,
                                                     " and ", flags.key,
                                                     ": mutual TLS is TLS with client "
                                                     "certificates"));
    }
    return GrpcPortCredentials{grpc::InsecureServerCredentials(), "plaintext"};
  }
  if (cert_path.empty() || key_path.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(cert_path.empty() ? flags.key : flags.cert, " is given without ",
                     cert_path.empty() ? flags.cert : flags.key, ": TLS needs both"));
  }
  ASSIGN_OR_RETURN(std::string cert_text, ReadFile(flags.cert, cert_path));
  ASSIGN_OR_RETURN(std::string key_text, ReadFile(flags.key, key_path));
  ASSIGN_OR_RETURN(X509Ptr cert, FirstCertificate(flags.cert, cert_path, cert_text));
  RETURN_IF_ERROR(CheckValidNow(flags.cert, cert_path, cert.get()));
  ASSIGN_OR_RETURN(PkeyPtr key, PrivateKey(flags.key, key_path, key_text));
  if (X509_check_private_key(cert.get(), key.get()) != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        Where(flags.key, key_path), "does not match the certificate in --tls_cert=", cert_path,
        TakeOpenSslError()));
  }
  const std::string description =
      absl::StrCat("certificate ", Subject(cert.get()), " from ", cert_path);
  grpc::SslServerCredentialsOptions options(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  options.pem_key_cert_pairs.push_back({std::move(key_text), std::move(cert_text)});
  if (client_ca_path.empty()) {
    return GrpcPortCredentials{grpc::SslServerCredentials(options),
                               absl::StrCat("TLS (", description, ")")};
  }
  ASSIGN_OR_RETURN(options.pem_root_certs, ReadFile(flags.client_ca, client_ca_path));
  RETURN_IF_ERROR(
      FirstCertificate(flags.client_ca, client_ca_path, options.pem_root_certs).status());
  options.client_certificate_request = GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
  return GrpcPortCredentials{
      grpc::SslServerCredentials(options),
      absl::StrCat("mutual TLS (", description, "; clients need a certificate signed by a CA in ",
                   client_ca_path, ")")};
}

}  // namespace emb::service
