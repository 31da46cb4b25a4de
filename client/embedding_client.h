// EmbeddingClient: a typed C++ client for embedding.v1.EmbeddingService and grpc.health.v1.Health.
//
// Every call takes a timeout, which becomes the RPC's deadline; there is no call without one.
// Errors come back as absl::Status with the server's gRPC code unchanged (both are
// google.rpc.Code). Thread-safe: one client may be shared by any number of threads.
#ifndef EMB_CLIENT_EMBEDDING_CLIENT_H_
#define EMB_CLIENT_EMBEDDING_CLIENT_H_

#include <grpcpp/channel.h>
#include <grpcpp/support/channel_arguments.h>
#include <grpcpp/support/status.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "client/features.h"
#include "embedding/v1/embedding_service.grpc.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "kernels/data_type.h"

namespace emb::client {

// The answer to one LookUp: `data` holds prod(shape) little-endian elements of `dtype`, row-major
// over `shape`, whose last axis is the table's dim.
struct LookUpResult {
  std::vector<int64_t> shape;
  DataType dtype = DataType::kFloat32;
  std::string data;

  // Number of elements, the product of `shape`.
  int64_t num_elements() const;
  // The elements widened to float32 (exact for every dtype).
  std::vector<float> ToFloat32() const;
};

// One table as ListTables describes it.
struct TableInfo {
  std::string name;
  int64_t rows = 0;
  int64_t dim = 0;
  DataType dtype = DataType::kFloat32;
  std::string device;
  bool is_default = false;
  // The last sequence applied by EmbeddingAdminService.UpdateRows (0: none since the table was
  // loaded), and the rows it has written since; a publisher resumes after `sequence`.
  int64_t sequence = 0;
  int64_t updated_rows = 0;
  // For a table loaded from a version directory (DIR/N/): the version it was loaded from, or the
  // one AdminClient::SaveTable last wrote; 0 for a table loaded from a file or the demo table.
  int64_t version = 0;
  // Whether that version is pinned (AdminClient::LoadVersion of a given version, a rollback): the
  // server's polling for newer versions leaves the table on it until a LoadVersion of 0.
  bool version_pinned = false;
  // Bytes the table's rows take where they live (rows x RowBytes(dtype, dim) for a table that
  // has no padding).
  int64_t bytes = 0;
  // Whether the table is in the host tier: on a GPU, its rows in pinned host memory with a GPU
  // cache of `cache_rows` of them (a table larger than the GPU memory it may use); false where
  // every row is on the device, and on the CPU.
  bool host_tier = false;
  int64_t cache_rows = 0;
  // GPU memory the table takes (its rows, or its cache, and its batch buffers); 0 on the CPU.
  int64_t device_bytes = 0;
  // A shard (the server's --shard): shard shard_index of shard_count, holding rows first_row ..
  // first_row + rows - 1 of the whole table's whole_rows; ids stay global. Not a shard:
  // shard_count 0, first_row 0, whole_rows == rows.
  int shard_index = 0;
  int shard_count = 0;
  int64_t first_row = 0;
  int64_t whole_rows = 0;
  // A table on several devices of one server (its --device lists them): "replicas" (the whole
  // table on each) or "rows" (its rows split over them), and each device's part; empty for a
  // table on one device.
  struct Part {
    std::string device;
    int64_t first_row = 0;
    int64_t rows = 0;
    int64_t device_bytes = 0;
    bool host_tier = false;
  };
  std::string placement;
  std::vector<Part> parts;
};

// How a LookUp combines the rows of each bag of ids (embedding.v1.Pooling, same values).
enum class Pooling : int {
  kNone = 0,  // one row per id
  kSum = 1,   // each bag's sum (of its rows times their weights, given weights)
  kMean = 2,  // each bag's mean
};

// "none", "sum", "mean".
const char* PoolingName(Pooling pooling);

// Parses a PoolingName() spelling; returns false for anything else.
bool ParsePooling(absl::string_view name, Pooling* out);

// The arguments of one LookUp. An empty `table` selects the server's default table; an empty
// `shape` means [ids.size()]; no `dtype` means the table's own type (float32 for a quantized
// table).
//
// With `pooling`, the answer has one row per bag of ids: given `offsets` (CSR: bags + 1 values,
// the first 0, the last ids.size(), never decreasing) or `lengths` (one per bag, summing to
// ids.size()), its shape is [bags, dim]; given neither, the last axis of `shape` is the bag and
// the answer's shape is shape[:-1] + [dim]. `weights` (one per id) scale the rows of a kSum.
// An empty bag answers zeros. The server checks all of this (INVALID_ARGUMENT naming the
// problem); the client sends the fields as they are.
struct LookUpRequestSpec {
  std::string table;
  std::vector<int64_t> ids;
  std::vector<int64_t> shape;
  std::optional<DataType> dtype;
  Pooling pooling = Pooling::kNone;
  std::vector<int64_t> offsets;
  std::vector<int64_t> lengths;
  std::vector<float> weights;
};

// Converts a gRPC status to an absl::Status; the code numbers are the same.
absl::Status FromGrpcStatus(const grpc::Status& status);

// Channel arguments of every channel this library makes: no message size limits. A
// `connection_id` >= 0 also gives the channel a private subchannel pool and a distinct argument,
// so that channels with different ids never share a TCP connection.
grpc::ChannelArguments DefaultChannelArguments(int connection_id = -1);

// TLS settings of a channel, as PEM text (not file paths).
struct TlsOptions {
  // CA certificate(s) the server's certificate must chain to; empty: gRPC's default roots
  // ($GRPC_DEFAULT_SSL_ROOTS_FILE_PATH, else the system's).
  std::string root_certs;
  // For mutual TLS: the client's certificate (chain) and its private key, both or neither.
  std::string cert_chain;
  std::string private_key;
  // The name the server's certificate must carry, instead of the target's host (e.g. calling
  // 10.0.0.7:50051 whose certificate names "embeddings.internal"); empty: the target's host.
  std::string server_name;
};

// A channel to `target` ("host:port", "dns:///host:port", "unix:/path") built with
// DefaultChannelArguments(connection_id): plaintext if `tls` is nullopt, else TLS with `tls`.
// A certificate the server refuses, or a server certificate that does not verify, shows up as
// UNAVAILABLE on the calls.
std::shared_ptr<grpc::Channel> CreateChannel(const std::string& target,
                                             const std::optional<TlsOptions>& tls,
                                             int connection_id = -1);

// The same with channel arguments of the caller's (DefaultChannelArguments() and more, such as a
// service config).
std::shared_ptr<grpc::Channel> CreateChannel(const std::string& target,
                                             const std::optional<TlsOptions>& tls,
                                             grpc::ChannelArguments args);

// `target` with ":`port`" added where it names a host without a port, for which gRPC would dial
// 443 (HTTPS's port): "localhost" -> "localhost:50051", "dns:///emb.ns.svc" ->
// "dns:///emb.ns.svc:50051", "[::1]" -> "[::1]:50051". Any other target is returned as it is: one
// with a port, a bare IPv6 address, "unix:", "ipv4:" and "ipv6:" lists, other schemes.
std::string TargetWithDefaultPort(absl::string_view target, int port);

// CreateChannel(target, std::nullopt, connection_id).
std::shared_ptr<grpc::Channel> CreateInsecureChannel(const std::string& target,
                                                     int connection_id = -1);

// Fills `out` from `spec`. Exposed for callers that drive the generated stub themselves.
void ToLookUpRequest(const LookUpRequestSpec& spec, embedding::v1::LookUpRequest* out);

// Converts a server answer. INTERNAL if it is malformed (an unknown dtype or one that is not a
// value type, negative dims, or a byte count that does not match the shape);
// `response->embeddings()` is moved out on success.
absl::StatusOr<LookUpResult> FromLookUpResponse(embedding::v1::LookUpResponse* response);

class EmbeddingClient {
 public:
  // Uses `channel` for both services.
  explicit EmbeddingClient(std::shared_ptr<grpc::Channel> channel);

  // A client on CreateChannel(target, tls): plaintext unless `tls` is given. Connects lazily: an
  // unreachable target, or a failed TLS handshake, shows up as UNAVAILABLE or DEADLINE_EXCEEDED on
  // the first call.
  static std::unique_ptr<EmbeddingClient> Connect(
      const std::string& target, const std::optional<TlsOptions>& tls = std::nullopt);

  EmbeddingClient(const EmbeddingClient&) = delete;
  EmbeddingClient& operator=(const EmbeddingClient&) = delete;

  // Looks up `ids` (row-major over `shape`; empty shape means [ids.size()]) in `table` (empty:
  // the default table), converted to `dtype` (nullopt: the table's type). Returns the server's
  // status on failure (NOT_FOUND, INVALID_ARGUMENT, OUT_OF_RANGE, RESOURCE_EXHAUSTED,
  // UNAVAILABLE, DEADLINE_EXCEEDED, ...); INVALID_ARGUMENT without calling if `timeout` is not
  // positive and finite.
  absl::StatusOr<LookUpResult> LookUp(absl::string_view table, absl::Span<const int64_t> ids,
                                      absl::Span<const int64_t> shape,
                                      std::optional<DataType> dtype, absl::Duration timeout);
  // The same for every field of `spec`, pooled lookups included.
  absl::StatusOr<LookUpResult> LookUp(const LookUpRequestSpec& spec, absl::Duration timeout);

  // Starts the same call without blocking; `done` runs once, on a gRPC thread, with the result.
  // `spec` is copied, so it need not outlive the call. `done` must not block.
  void LookUpAsync(const LookUpRequestSpec& spec, absl::Duration timeout,
                   absl::AnyInvocable<void(absl::StatusOr<LookUpResult>)> done);

  // Every feature of a batch of `batch_size` samples in one call (client/features.h), its answer
  // in `dtype` (nullopt: float32). The server's status on failure, naming the feature and its
  // table; INVALID_ARGUMENT without calling if `timeout` is not positive and finite.
  absl::StatusOr<FeaturesResult> LookUpFeatures(int64_t batch_size,
                                                absl::Span<const FeatureSpec> features,
                                                std::optional<DataType> dtype,
                                                absl::Duration timeout);

  // Every table the server holds, the default table first. A table's dtype may be a quantized
  // type (DataType::kInt8Rowwise, kInt4Rowwise); its lookups answer value types.
  absl::StatusOr<std::vector<TableInfo>> ListTables(absl::Duration timeout);

  // grpc.health.v1.Health/Check for `service` ("" is the whole server). Returns the
  // ServingStatus name: "SERVING", "NOT_SERVING", "UNKNOWN" or "SERVICE_UNKNOWN". NOT_FOUND if the
  // server does not know `service`; UNIMPLEMENTED if it has no health service.
  absl::StatusOr<std::string> CheckHealth(absl::string_view service, absl::Duration timeout);

  // The generated stub, for callers that manage their own messages (the load generator).
  embedding::v1::EmbeddingService::Stub* stub() const { return stub_.get(); }

 private:
  // Sends `request` with `timeout` as its deadline (already checked) and converts the answer.
  absl::StatusOr<LookUpResult> SendLookUp(const embedding::v1::LookUpRequest& request,
                                          absl::Duration timeout);

  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<embedding::v1::EmbeddingService::Stub> stub_;
  std::unique_ptr<grpc::health::v1::Health::Stub> health_stub_;
};

}  // namespace emb::client

#endif  // EMB_CLIENT_EMBEDDING_CLIENT_H_
