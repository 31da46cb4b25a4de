#include "client/cli/common.h"

#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "client/cli/flags.h"
#include "client/embedding_client.h"
#include "kernels/data_type.h"

namespace emb::client::cli {
namespace {

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

}  // namespace

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

int Fail(absl::string_view command, const absl::Status& status) {
  std::cerr << "embedding-client " << command << ": " << status << "\n";
  return 1;
}

int FailAdmin(absl::string_view command, const absl::Status& status) {
  if (status.code() != absl::StatusCode::kUnimplemented) {
    return Fail(command, status);
  }
  return Fail(command, absl::Status(status.code(), absl::StrCat("--admin_target=", AdminTarget(),
                                                                ": ", status.message())));
}

}  // namespace emb::client::cli
