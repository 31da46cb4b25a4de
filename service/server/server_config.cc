// The checks of ServerConfig that EmbeddingServer::Start makes before any port opens.
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "service/batch/answer_buffer.h"
#include "service/common/status_macros.h"
#include "service/server/listen_address.h"
#include "service/server/server.h"
#include "service/server/server_internal.h"

namespace emb::service {
namespace {

// The admin flags besides the address: consistent, and safe for the address they serve.
absl::Status CheckAdminConfig(const ServerConfig& c, const ListenAddress& address) {
  const bool any_tls =
      !c.admin_tls_cert.empty() || !c.admin_tls_key.empty() || !c.admin_tls_client_ca.empty();
  if (c.admin_insecure) {
    if (any_tls || !c.admin_allowed_identities.empty()) {
      return absl::InvalidArgumentError(
          "--admin_insecure takes no --admin_tls_* or --admin_allowed_identities: it serves the "
          "admin port in plaintext to every caller");
    }
    if (!IsLoopbackHost(address.host)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--admin_insecure serves writes to every caller, so only on a literal loopback "
          "address (127.0.0.0/8, [::1], or localhost itself), not --admin_address=",
          c.admin_address,
          "; for any other address use mutual TLS (--admin_tls_cert, "
          "--admin_tls_key, --admin_tls_client_ca, --admin_allowed_identities)"));
    }
    return absl::OkStatus();
  }
  if (c.admin_tls_cert.empty() || c.admin_tls_key.empty() || c.admin_tls_client_ca.empty()) {
    return absl::InvalidArgumentError(
        "--admin_address needs mutual TLS: --admin_tls_cert, --admin_tls_key and "
        "--admin_tls_client_ca (or --admin_insecure, on a loopback host only)");
  }
  if (c.admin_allowed_identities.empty()) {
    return absl::InvalidArgumentError(
        "--admin_address with mutual TLS needs --admin_allowed_identities: the client "
        "certificate identities (SAN entries, or CN) that may write");
  }
  return absl::OkStatus();
}
}  // namespace

absl::Status CheckConfig(const ServerConfig& c) {
  if (c.batcher.max_batch_ids <= 0 || c.limits.max_request_ids <= 0 ||
      c.limits.max_request_ids > c.batcher.max_batch_ids) {
    return absl::InvalidArgumentError(absl::StrCat("--max_request_ids (", c.limits.max_request_ids,
                                                   ") must be in [1, --max_batch_ids (",
                                                   c.batcher.max_batch_ids, ")]"));
  }
  if (c.limits.max_features_per_call < 1 || c.limits.max_feature_call_ids < 1 ||
      c.limits.max_feature_call_ids > (int64_t{1} << 26)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--max_features_per_call (", c.limits.max_features_per_call,
        ") must be at least 1, and --max_feature_call_ids (", c.limits.max_feature_call_ids,
        ") in [1, 2^26] (it sets the gRPC receive limit to 16 bytes an id)"));
  }
  if (c.batcher.max_queue_ids < c.batcher.max_batch_ids) {
    return absl::InvalidArgumentError(absl::StrCat("--max_queue_ids (", c.batcher.max_queue_ids,
                                                   ") must be at least --max_batch_ids (",
                                                   c.batcher.max_batch_ids, ")"));
  }
  if (c.limits.max_response_bytes <= 0 ||
      c.limits.max_response_bytes > (int64_t{1} << 31) - kMessageSlack - 1) {
    return absl::InvalidArgumentError("--max_response_bytes must be in [1, 2 GiB - 64 KiB)");
  }
  const auto max_answer_block = static_cast<int64_t>(
      AnswerBufferPool::BlockBytes(static_cast<size_t>(c.limits.max_response_bytes)));
  if (c.limits.max_unsent_answer_bytes_per_connection < max_answer_block) {
    return absl::InvalidArgumentError(absl::StrCat("--max_unsent_answer_bytes_per_connection (",
                                                   c.limits.max_unsent_answer_bytes_per_connection,
                                                   ") must hold one answer of "
                                                   "--max_response_bytes (",
                                                   c.limits.max_response_bytes, ", in a block of ",
                                                   max_answer_block, " bytes)"));
  }
  if (c.limits.max_unsent_answer_bytes < c.limits.max_unsent_answer_bytes_per_connection) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max_unsent_answer_bytes (", c.limits.max_unsent_answer_bytes,
                     ") must be at least --max_unsent_answer_bytes_per_connection (",
                     c.limits.max_unsent_answer_bytes_per_connection, ")"));
  }
  if (c.grpc_memory_bytes == 0) {
    return absl::InvalidArgumentError("--grpc_memory_bytes must be positive");
  }
  if (c.max_concurrent_streams < 0) {
    return absl::InvalidArgumentError("--max_concurrent_streams must not be negative");
  }
  if (c.store.inflight_batches < 1) {
    return absl::InvalidArgumentError("--inflight_batches must be at least 1");
  }
  if (!c.store.on_device_lost) {
    return absl::InvalidArgumentError("ServerConfig: store.on_device_lost is required");
  }
  if (c.batcher.max_queue_delay < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--max_queue_delay_us must not be negative");
  }
  if (c.store.completion_poll < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--completion_poll_us must not be negative");
  }
  if (c.batcher.inline_batches < 0) {
    return absl::InvalidArgumentError("--inline_batches must not be negative");
  }
  if (c.batcher.answer_threads < 0) {
    return absl::InvalidArgumentError("--answer_threads must be -1 (automatic) or at least 0");
  }
  return absl::OkStatus();
}

absl::Status CheckAdminFlags(const ServerConfig& c) {
  if (c.admin_address.empty()) {
    if (!c.admin_tls_cert.empty() || !c.admin_tls_key.empty() || !c.admin_tls_client_ca.empty() ||
        !c.admin_allowed_identities.empty() || c.admin_insecure) {
      return absl::InvalidArgumentError(
          "--admin_tls_*, --admin_allowed_identities and --admin_insecure need --admin_address "
          "(the admin service is off without it)");
    }
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(const ListenAddress address,
                   ParseListenAddress("--admin_address", c.admin_address));
  RETURN_IF_ERROR(CheckAdminConfig(c, address));
  if (c.admin_max_message_bytes <= 0 || c.admin_max_message_bytes > INT32_MAX) {
    return absl::InvalidArgumentError("--admin_max_message_bytes must be in [1, 2 GiB)");
  }
  return absl::OkStatus();
}

}  // namespace emb::service
