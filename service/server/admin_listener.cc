// EmbeddingServer's two ways of changing a table while it serves: the admin listener (row
// updates, table saves and version loads; StartAdmin) and the poller of version directories
// (PollVersions).
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "grpc/grpc.h"
#include "grpcpp/resource_quota.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"
#include "service/common/clock.h"
#include "service/common/log.h"
#include "service/common/status_macros.h"
#include "service/rpc/admin_service.h"
#include "service/rpc/call_metrics.h"
#include "service/rpc/embedding_service.h"
#include "service/rpc/version_loader.h"
#include "service/server/listen_address.h"
#include "service/server/server.h"
#include "service/server/server_credentials.h"
#include "service/server/server_internal.h"
#include "service/tables/table_versions.h"

namespace emb::service {
namespace {

// The admin listener's calls at once on one connection: a writer needs one (UpdateRows) or a few
// (saves and loads beside it); a client past this waits for a stream, it is not refused.
constexpr int kAdminStreamsPerConnection = 4;

// The admin listener's memory quota (gRPC's read buffers and calls, every connection together):
// room for the largest message on each stream of one connection.
int64_t AdminMemoryQuotaBytes(int64_t max_message_bytes) {
  return kAdminStreamsPerConnection * max_message_bytes;
}
}  // namespace

absl::Status EmbeddingServer::StartAdmin(const ServerConfig& config) {
  // The flags were checked by CheckAdminFlags before any port opened.
  if (config.admin_address.empty()) {
    LogInfo("admin service off (no --admin_address): tables take no updates");
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(const ListenAddress address,
                   ParseListenAddress("--admin_address", config.admin_address));
  GrpcPortCredentials credentials{grpc::InsecureServerCredentials(),
                                  "plaintext, every caller may write (--admin_insecure)"};
  if (!config.admin_insecure) {
    ASSIGN_OR_RETURN(
        credentials,
        MakeGrpcPortCredentials(
            config.admin_tls_cert, config.admin_tls_key, config.admin_tls_client_ca,
            TlsFlagNames{"--admin_tls_cert", "--admin_tls_key", "--admin_tls_client_ca"}));
    // The allow-list on each call's headers, before gRPC reads its message.
    credentials.credentials->SetAuthMetadataProcessor(
        std::make_shared<AdminAllowListProcessor>(config.admin_allowed_identities));
  }
  admin_ = std::make_unique<AdminServiceImpl>(
      AdminOptions{config.admin_allowed_identities, !config.admin_insecure});
  grpc::ServerBuilder builder;
  builder.AddListeningPort(config.admin_address, credentials.credentials, &admin_port_);
  builder.RegisterService(admin_.get());
  builder.SetMaxReceiveMessageSize(static_cast<int>(config.admin_max_message_bytes));
  // What a caller can make the admin listener hold: a caller without a certificate
  // signed by the client CA is refused in the TLS handshake, and one whose certificate is off the
  // allow-list on its headers (the processor above), so only an allowed writer's messages are
  // read. gRPC 1.51 has no per-method receive limit: what an allowed writer (or a flood of
  // headers) can hold is bounded by a quota of the listener's own (not the lookup port's) and a
  // stream cap.
  grpc::ResourceQuota quota("embedding-admin");
  quota.Resize(static_cast<size_t>(AdminMemoryQuotaBytes(config.admin_max_message_bytes)));
  builder.SetResourceQuota(quota);
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, kAdminStreamsPerConnection);
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.SetCompressionAlgorithmSupportStatus(GRPC_COMPRESS_DEFLATE, false);
  builder.SetCompressionAlgorithmSupportStatus(GRPC_COMPRESS_GZIP, false);
  builder.AddChannelArgument(GRPC_ARG_MAX_METADATA_SIZE, kMaxMetadataBytes);
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> interceptors;
  interceptors.push_back(MakeCallMetricsFactory(metrics_.get(), &active_admin_calls_));
  builder.experimental().SetInterceptorCreators(std::move(interceptors));
  if (address.port != 0) {
    if (const std::string why = WhyCannotBind(address); !why.empty()) {
      return absl::UnavailableError(absl::StrCat(
          "cannot listen for admin calls on --admin_address=", config.admin_address, ": ", why));
    }
  }
  admin_server_ = builder.BuildAndStart();
  if (admin_server_ == nullptr || admin_port_ == 0) {
    const std::string why = WhyCannotBind(address);
    return absl::UnavailableError(absl::StrCat("cannot listen for admin calls on --admin_address=",
                                               config.admin_address, why.empty() ? "" : ": ", why));
  }
  LogInfo("admin service (UpdateRows) on ", address.host, ":", admin_port_, ", ",
          credentials.description,
          config.admin_insecure
              ? ""
              : absl::StrCat("; writers: ", absl::StrJoin(config.admin_allowed_identities, ", ")));
  return absl::OkStatus();
}

void EmbeddingServer::PollVersions(absl::Duration period) {
  while (!stop_polling_.WaitForNotificationWithTimeout(period)) {
    for (ServedTable& t : tables_) {
      if (t.versions == nullptr || t.versions->pinned.load()) {
        continue;
      }
      absl::StatusOr<std::vector<int64_t>> versions = ListVersions(t.versions->dir);
      if (!versions.ok() || versions->empty()) {
        continue;
      }
      const int64_t newest = versions->front();
      if (newest <= t.versions->version.load() || newest == t.versions->refused.load()) {
        continue;
      }
      absl::StatusOr<LoadedVersion> loaded =
          LoadTableVersion(t, newest, /*pin=*/false, Clock::Real());
      if (!loaded.ok() && loaded.status().code() != absl::StatusCode::kAborted) {
        t.versions->refused.store(newest);  // logged once; a newer version is tried again
      }
    }
  }
}

}  // namespace emb::service
