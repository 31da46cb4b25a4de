// absl::Status -> grpc::Status. Both code sets are google.rpc.Code, so the numbers carry over.
//
// A status message travels as the grpc-message header, and clients refuse headers past their
// metadata limit (16 KiB by default in gRPC's C++ and Python clients; grpc-js hangs), which would
// turn a NOT_FOUND or INVALID_ARGUMENT into a RESOURCE_EXHAUSTED the caller cannot act on. So
// what a message echoes of a request is bounded (EchoText, ShapeText), and ToGrpcStatus cuts any
// message to kMaxStatusMessageBytes.
#ifndef EMB_SERVICE_RPC_GRPC_STATUS_H_
#define EMB_SERVICE_RPC_GRPC_STATUS_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "grpcpp/support/status.h"

namespace emb::service {

// The most bytes of a status message on the wire.
inline constexpr size_t kMaxStatusMessageBytes = 1024;
// The most bytes of a request's text (a table name) that a message echoes.
inline constexpr size_t kMaxEchoBytes = 64;
// The most dims of a request's shape that a message echoes.
inline constexpr int kMaxEchoDims = 8;

// `s` cut to at most `max_bytes`, on a UTF-8 character boundary.
inline absl::string_view CutUtf8(absl::string_view s, size_t max_bytes) {
  if (s.size() <= max_bytes) {
    return s;
  }
  size_t n = max_bytes;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) {
    --n;  // s[n] continues a character: cut before the character
  }
  return s.substr(0, n);
}

// A request's text as a message echoes it: non-printable bytes escaped (\xNN), at most
// kMaxEchoBytes of it, and its length where it was cut.
inline std::string EchoText(absl::string_view text) {
  const absl::string_view shown = text.substr(0, kMaxEchoBytes);
  std::string out = absl::CHexEscape(shown);
  if (shown.size() < text.size()) {
    absl::StrAppend(&out, "... (", text.size(), " bytes)");
  }
  return out;
}

// "[2, 3]", or the first kMaxEchoDims dims and the count: "[1, 1, ... (5000 dims)]".
template <typename Dims>
std::string ShapeText(const Dims& shape) {
  std::string out = "[";
  int i = 0;
  for (const int64_t d : shape) {
    if (i == kMaxEchoDims) {
      absl::StrAppend(&out, ", ... (", shape.size(), " dims)");
      break;
    }
    absl::StrAppend(&out, i > 0 ? ", " : "", d);
    ++i;
  }
  return out + "]";
}

inline grpc::Status ToGrpcStatus(const absl::Status& s) {
  if (s.ok()) {
    return grpc::Status::OK;
  }
  const absl::string_view message = s.message();
  if (message.size() <= kMaxStatusMessageBytes) {
    return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(message));
  }
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()),
                      absl::StrCat(CutUtf8(message, kMaxStatusMessageBytes - 32), "... (",
                                   message.size(), " bytes)"));
}

}  // namespace emb::service

#endif  // EMB_SERVICE_RPC_GRPC_STATUS_H_
