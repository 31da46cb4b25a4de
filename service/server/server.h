// EmbeddingServer: the whole service. Checks every table file, opens the gRPC and metrics ports
// (health NOT_SERVING), loads each table onto its device, then serves (health SERVING).
// SetNotServing() and Shutdown() implement the SIGTERM sequence. The server owns the state that
// sequence reads (ActiveCalls, kept by the call interceptor) apart from the metrics, and the one
// AnswerBufferPool every batcher takes answer memory from (portable pinned memory where any table
// is on a GPU). Thread-safe.
#ifndef EMB_SERVICE_SERVER_SERVER_H_
#define EMB_SERVICE_SERVER_SERVER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "grpcpp/server.h"
#include "prometheus/exposer.h"
#include "service/batch/answer_buffer.h"
#include "service/batch/batcher.h"
#include "service/metrics/device_loss_metrics.h"
#include "service/metrics/metrics.h"
#include "service/metrics/scrape_time_metrics.h"
#include "service/rpc/active_calls.h"
#include "service/rpc/admin_service.h"
#include "service/rpc/embedding_service.h"
#include "service/rpc/health_service.h"
#include "service/server/memory_returner.h"
#include "service/store/device.h"
#include "service/store/store_options.h"
#include "service/tables/table_source.h"

namespace emb::service {

struct ServerConfig {
  std::vector<TableSpec> tables;  // empty: one demo table
  std::string default_table;      // empty: the first table
  int64_t demo_rows = 100000;
  int64_t demo_dim = 128;
  uint64_t demo_seed = 42;
  // Every table's shard, unless its spec names its own; nullopt: whole tables.
  std::optional<ShardSpec> shard;
  std::string grpc_address = "0.0.0.0:50051";
  std::string metrics_address = "0.0.0.0:9464";
  // auto | cpu | cuda | cuda:N, a list of them (cuda:0,cuda:1) or all (ResolveDevices): with
  // several, each table is on every one of them, laid out as its placement says.
  std::string device = "auto";
  // How a table is laid out over several devices, unless its spec names its own: "replicas"
  // (the whole table on each; batches go to the least busy) or "rows" (the rows split over
  // them; MultiDeviceStore).
  std::string placement = "replicas";
  BatcherOptions batcher;
  // The most bytes of answer buffers kept for reuse, per device (pinned memory for a GPU).
  size_t answer_pool_bytes = AnswerBufferPool::kDefaultMaxBytes;
  ServiceLimits limits;
  // Calls in progress per connection that gRPC lets a client have; more wait on the client
  // (HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS). 0: no limit. gRPC 1.51 applies it only to clients
  // that acknowledge the server's SETTINGS: the memory a connection can hold is bounded by
  // limits.max_unsent_answer_bytes_per_connection instead.
  int max_concurrent_streams = 128;
  // The memory gRPC itself may use (its grpc::ResourceQuota): read buffers, calls' arenas,
  // headers. Past it gRPC reclaims: it closes idle connections and cancels streams. Answers are
  // not in it (they are ours: limits.max_unsent_answer_bytes bounds them).
  size_t grpc_memory_bytes = size_t{1} << 30;
  // The stores' options. Their max_batch_ids is set from batcher.max_batch_ids. on_device_lost
  // is required: called (after health goes NOT_SERVING) when the device is lost; must not return.
  // store.host_tier: whether a GPU table that does not fit goes to the host tier or is refused.
  // store.gpu_budget_bytes and store.hot_ids are set per table (TableSpec's gpu_budget and
  // hot_ids, and gpu_memory_budget_bytes).
  StoreOptions store;
  // GPU: the device memory all tables together may take (their rows or host tiers' caches, and
  // their batch buffers). The tables are placed in order, the default first: each may take the
  // smaller of its own gpu_budget and what the tables before it left; a table that finds too
  // little goes to the host tier (or is refused without store.host_tier). 0: no such bound, each
  // table takes what the device has free.
  size_t gpu_memory_budget_bytes = 0;
  // TLS on the gRPC port, as PEM file paths. No cert and key: plaintext. Cert and key: TLS.
  // With client_ca too: mutual TLS, clients must present a certificate signed by that CA.
  std::string tls_cert;       // the server's certificate (chain)
  std::string tls_key;        // its private key, unencrypted
  std::string tls_client_ca;  // CA certificate(s) that client certificates must chain to
  // The admin listener (EmbeddingAdminService: row updates), HOST:PORT; empty: no admin service
  // anywhere. It takes mutual TLS (admin_tls_cert, admin_tls_key, admin_tls_client_ca, all
  // three) and writes only for client identities on admin_allowed_identities; or, with
  // admin_insecure, plaintext with no identity check, on a loopback host only.
  std::string admin_address;
  std::string admin_tls_cert;
  std::string admin_tls_key;
  std::string admin_tls_client_ca;
  std::vector<std::string> admin_allowed_identities;
  bool admin_insecure = false;
  // How often each table served from a version directory is checked for a newer version, which
  // is then loaded and swapped in (unless the table is pinned); zero: never.
  absl::Duration version_poll = absl::ZeroDuration();
  // The largest UpdateRows message the admin port reads; the admin listener's memory quota is
  // 4 times this (its streams per connection).
  int64_t admin_max_message_bytes = int64_t{64} << 20;
  // Called once the tables are loaded, just before health says SERVING (main.cc: from here on a
  // stop signal drains instead of ending start-up). May be empty.
  std::function<void()> before_serving;
};

class EmbeddingServer {
 public:
  // Starts the server; returns once every table is loaded and health says SERVING.
  // Errors: a broken table file (before any port opens), a table that does not fit its device,
  // a port that cannot be bound, an inconsistent config or an unusable TLS file
  // (INVALID_ARGUMENT, naming the flag).
  static absl::StatusOr<std::unique_ptr<EmbeddingServer>> Start(const ServerConfig& config);
  ~EmbeddingServer();

  int grpc_port() const { return grpc_port_; }
  int metrics_port() const { return metrics_port_; }
  // 0 where there is no admin listener.
  int admin_port() const { return admin_port_; }

  // Health NOT_SERVING for every service; the server keeps answering calls.
  void SetNotServing();
  // Stops taking calls, answers every call already accepted (cancelling what is left at
  // `deadline`), drains the batchers.
  void Shutdown(absl::Time deadline);

 private:
  EmbeddingServer() = default;
  // A table opened at start-up (its header checked), with how it is to be placed.
  struct OpenedTable {
    std::unique_ptr<TableSource> source;
    size_t gpu_budget_bytes = 0;   // TableSpec::gpu_budget_bytes; 0: none of its own
    std::string hot_ids_path;      // TableSpec::hot_ids_path
    std::vector<int64_t> hot_ids;  // read from hot_ids_path: global ids of the whole table
    std::string placement;         // TableSpec::placement; empty: ServerConfig::placement
    std::string devices_option;    // TableSpec::devices; empty: ServerConfig::device
    std::vector<Device> devices;   // where the table goes: devices_option's, or --device's
  };
  static absl::StatusOr<std::vector<OpenedTable>> OpenTables(const ServerConfig& config);
  // `all_devices`: every device some table is on, once each.
  absl::Status LoadTables(const ServerConfig& config, const std::vector<Device>& all_devices,
                          std::vector<OpenedTable>& tables);
  // Every poll period, each unpinned table from a version directory whose newest version is newer
  // than the one it serves (and not one found broken before) loads it.
  void PollVersions(absl::Duration period);
  // Opens the admin listener where config.admin_address asks for one.
  absl::Status StartAdmin(const ServerConfig& config);
  // Shutdown's first step: returns once every call in progress is one the service holds, and
  // none has arrived for a moment; or at `until`.
  void WaitUntilOnlyHeldCallsRemain(absl::Time until) const;

  // First, so that it goes last: the batchers take answers from it, and gRPC recycles them.
  std::unique_ptr<AnswerBufferPool> answer_pool_;  // of the tables' devices
  ActiveCalls active_calls_;                       // outlives server_: its calls count here
  ActiveCalls active_admin_calls_;                 // outlives admin_server_
  std::unique_ptr<Metrics> metrics_;
  // Returns freed memory to the system; before exposer_, whose scrapes read it.
  std::unique_ptr<MemoryReturner> memory_returner_;
  // Before exposer_, so that it outlives the exposer's scrapes.
  std::shared_ptr<ScrapeTimeMetrics> scrape_metrics_;
  // One a device, read by scrape_metrics_'s scrapes.
  std::vector<std::unique_ptr<DeviceLossMetrics>> device_losses_;
  std::unique_ptr<EmbeddingServiceImpl> service_;
  std::unique_ptr<HealthService> health_;  // outlives server_: its calls end first
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<prometheus::Exposer> exposer_;
  std::unique_ptr<AdminServiceImpl> admin_;  // outlives admin_server_: its calls end first
  std::unique_ptr<grpc::Server> admin_server_;
  // Polls for new versions (config.version_poll); stopped first at shutdown.
  absl::Notification stop_polling_;
  std::thread version_poller_;
  std::vector<ServedTable> tables_;
  int grpc_port_ = 0;
  int metrics_port_ = 0;
  int admin_port_ = 0;
  bool shut_down_ = false;
};

}  // namespace emb::service

#endif  // EMB_SERVICE_SERVER_SERVER_H_
