// Internal to the server's files (service/server/: server.cc, server_config.cc, table_loading.cc,
// admin_listener.cc): the constants and helpers that more than one of them uses. Not for use
// outside service/server/.
#ifndef EMB_SERVICE_SERVER_SERVER_INTERNAL_H_
#define EMB_SERVICE_SERVER_SERVER_INTERNAL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "service/server/server.h"
#include "service/store/device.h"
#include "service/store/embedding_store.h"

namespace emb::service {

// Room in a message around the payload: field tags, the shape, the table name.
inline constexpr int64_t kMessageSlack = 64 << 10;

// The most bytes of headers one call may send (GRPC_ARG_MAX_METADATA_SIZE).
inline constexpr int kMaxMetadataBytes = 8 << 10;

// Defined in server_config.cc.

// The settings besides the listen addresses (Start parses those first).
absl::Status CheckConfig(const ServerConfig& c);

// The admin flags: consistent, and safe for the address they serve; checked before any port
// opens, so that a refused admin set-up never leaves a gRPC port open for a moment.
absl::Status CheckAdminFlags(const ServerConfig& c);

// Defined in table_loading.cc.

// "replicas" or "rows" (`what`: the flag or option that said it).
absl::StatusOr<Placement> ParsePlacement(absl::string_view text, absl::string_view what);

// "cuda:0,cuda:1".
std::string DeviceNames(const std::vector<Device>& devices);

}  // namespace emb::service

#endif  // EMB_SERVICE_SERVER_SERVER_INTERNAL_H_
