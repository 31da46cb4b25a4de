#include "service/server/server.h"

#include <algorithm>
#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "grpc/grpc.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/resource_quota.h"
#include "grpcpp/server_builder.h"
#include "prometheus/metric_type.h"
#include "service/common/log.h"
#include "service/common/status_macros.h"
#include "service/rpc/call_metrics.h"
#include "service/server/accept_guard.h"
#include "service/server/listen_address.h"
#include "service/server/server_credentials.h"
#include "service/server/server_internal.h"
#include "service/store/device.h"
#include "service/store/embedding_store.h"

namespace emb::service {
namespace {

constexpr char kServiceName[] = "embedding.v1.EmbeddingService";

// The metrics port (civetweb, under prometheus-cpp's Exposer). Each of its threads holds one
// connection until that connection's request is read, and civetweb gives a connection
// request_timeout_ms in all to send its request line and headers (not per byte), then closes it.
// With civetweb's defaults (2 threads, 30 s) two slow clients blocked every scrape for 30 s at a
// time; with 8 threads and 30 s, 9 or more did (docs/reliability.md). Now 16 slow
// connections leave 16 threads free for scrapes, and each is closed after 5 s (a scrape is read
// and answered in milliseconds); a scrape that finds every thread taken waits in civetweb's
// queue until one of them is closed. Keep-alive stays off (civetweb's default): a connection is
// closed after its answer, so an idle one holds no thread.
constexpr int kMetricsThreads = 32;
constexpr int kMetricsRequestTimeoutMs = 5000;

// How often, and past how much memory freed and held by the allocator, it is given back to the
// system (MemoryReturner).
constexpr absl::Duration kMemoryReturnPeriod = absl::Seconds(5);
constexpr uint64_t kMemoryReturnThresholdBytes = uint64_t{64} << 20;

// `devices` without repeats, in order.
std::vector<Device> Distinct(const std::vector<Device>& devices) {
  std::vector<Device> distinct;
  for (const Device& d : devices) {
    if (std::none_of(distinct.begin(), distinct.end(),
                     [&](const Device& o) { return o.name() == d.name(); })) {
      distinct.push_back(d);
    }
  }
  return distinct;
}
}  // namespace

absl::StatusOr<std::unique_ptr<EmbeddingServer>> EmbeddingServer::Start(
    const ServerConfig& config) {
  ASSIGN_OR_RETURN(const ListenAddress grpc_address,
                   ParseListenAddress("--grpc_address", config.grpc_address));
  ASSIGN_OR_RETURN(const ListenAddress metrics_address,
                   ParseListenAddress("--metrics_address", config.metrics_address));
  RETURN_IF_ERROR(CheckConfig(config));
  RETURN_IF_ERROR(CheckAdminFlags(config));
  InstallAcceptGuard();  // before any listener: running out of descriptors must not end one
  ASSIGN_OR_RETURN(std::vector<OpenedTable> tables, OpenTables(config));
  ASSIGN_OR_RETURN(const std::vector<Device> devices, ResolveDevices(config.device));
  // Each table's own devices (its devices= option), and every device some table is on.
  std::vector<Device> all_devices = devices;
  for (OpenedTable& t : tables) {
    t.devices = devices;
    if (t.devices_option.empty()) {
      continue;
    }
    absl::StatusOr<std::vector<Device>> own = ResolveDevices(t.devices_option);
    if (!own.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("table '", t.source->name(),
                                                     "': devices=", t.devices_option, ": ",
                                                     own.status().message()));
    }
    t.devices = *own;
    all_devices.insert(all_devices.end(), own->begin(), own->end());
  }
  ASSIGN_OR_RETURN(const Placement placement, ParsePlacement(config.placement, "--placement"));
  (void)placement;  // checked before any port opens; each table's is taken in LoadTables

  auto server = std::unique_ptr<EmbeddingServer>(new EmbeddingServer());
  server->metrics_ = std::make_unique<Metrics>();
  // A well-behaved client has at most --max_concurrent_streams calls on a connection: as many may
  // wait there for room for their answers (128 where streams are not limited).
  ServiceLimits limits = config.limits;
  limits.max_waiting_calls_per_connection =
      config.max_concurrent_streams > 0 ? config.max_concurrent_streams : 128;
  server->service_ = std::make_unique<EmbeddingServiceImpl>(limits, server->metrics_.get());

  server->health_ = std::make_unique<HealthService>(std::vector<std::string>{kServiceName},
                                                    &server->metrics_->health_status());
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  ASSIGN_OR_RETURN(GrpcPortCredentials port_credentials,
                   MakeGrpcPortCredentials(config.tls_cert, config.tls_key, config.tls_client_ca));
  LogInfo("gRPC port: ", port_credentials.description);
  grpc::ServerBuilder builder;
  builder.AddListeningPort(config.grpc_address, port_credentials.credentials, &server->grpc_port_);
  builder.RegisterService(server->service_.get());
  builder.RegisterService(server->health_.get());  // NOT_SERVING until the tables are loaded
  // A varint id takes at most 10 bytes; a feature's id also a weight and a length.
  const int64_t max_receive =
      std::max(config.limits.max_request_ids * 10, config.limits.max_feature_call_ids * 16) +
      kMessageSlack;
  builder.SetMaxReceiveMessageSize(static_cast<int>(std::min<int64_t>(max_receive, INT32_MAX)));
  builder.SetMaxSendMessageSize(static_cast<int>(config.limits.max_response_bytes + kMessageSlack));
  // gRPC sets SO_REUSEPORT by default, so that a second server on a busy port would start
  // without a word and take part of its traffic. A busy port must stop start-up instead.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  // The service takes no compressed requests: a small gzip message can inflate to gigabytes
  // before any size check (docs/reliability.md). With the algorithms disabled, gRPC refuses such a
  // call (UNIMPLEMENTED) from its headers, before it reads the message.
  builder.SetCompressionAlgorithmSupportStatus(GRPC_COMPRESS_DEFLATE, false);
  builder.SetCompressionAlgorithmSupportStatus(GRPC_COMPRESS_GZIP, false);
  if (config.max_concurrent_streams > 0) {
    builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, config.max_concurrent_streams);
  }
  // What a client can make the server hold. gRPC 1.51 has no
  // lever on streams opened before the client acknowledges SETTINGS, nor on the data queued for
  // a client that reads nothing (GRPC_ARG_HTTP2_WRITE_BUFFER_SIZE only caps buffered writes that
  // ask for it), so answers are bounded by our own admission (UnsentAnswers):
  //   answer memory <= --answer_pool_bytes (idle blocks kept for reuse)
  //                    + --max_unsent_answer_bytes (answers admitted and not yet sent),
  //   one connection's unsent answers <= --max_unsent_answer_bytes_per_connection.
  // gRPC's own memory (read buffers, calls, headers) is bounded by its resource quota, and the
  // headers of one call by GRPC_ARG_MAX_METADATA_SIZE (sent to clients as
  // SETTINGS_MAX_HEADER_LIST_SIZE; 8 KiB is also 1.51's default).
  grpc::ResourceQuota quota;
  quota.Resize(config.grpc_memory_bytes);
  builder.SetResourceQuota(quota);
  builder.AddChannelArgument(GRPC_ARG_MAX_METADATA_SIZE, kMaxMetadataBytes);
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> interceptors;
  interceptors.push_back(MakeCallMetricsFactory(server->metrics_.get(), &server->active_calls_));
  builder.experimental().SetInterceptorCreators(std::move(interceptors));
  // Asked of the OS first, so that a busy port stops start-up with our one line, not after
  // gRPC's own multi-line error; the check after BuildAndStart stays for what the OS allows here
  // and gRPC still refuses.
  if (grpc_address.port != 0) {
    if (const std::string why = WhyCannotBind(grpc_address); !why.empty()) {
      return absl::UnavailableError(absl::StrCat(
          "cannot listen for gRPC on --grpc_address=", config.grpc_address, ": ", why));
    }
  }
  server->server_ = builder.BuildAndStart();
  if (server->server_ == nullptr || server->grpc_port_ == 0) {
    const std::string why = WhyCannotBind(grpc_address);
    return absl::UnavailableError(absl::StrCat("cannot listen for gRPC on --grpc_address=",
                                               config.grpc_address, why.empty() ? "" : ": ", why));
  }
  // civetweb's own message for a busy port is "null context when constructing CivetServer".
  if (metrics_address.port != 0) {
    if (const std::string why = WhyCannotBind(metrics_address); !why.empty()) {
      return absl::UnavailableError(absl::StrCat(
          "cannot serve metrics on --metrics_address=", config.metrics_address, ": ", why));
    }
  }
  try {
    server->exposer_ = std::make_unique<prometheus::Exposer>(std::vector<std::string>{
        "listening_ports", config.metrics_address, "num_threads", absl::StrCat(kMetricsThreads),
        "request_timeout_ms", absl::StrCat(kMetricsRequestTimeoutMs), "enable_keep_alive", "no"});
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat("cannot serve metrics on ", config.metrics_address, ": ", e.what()));
  }
  server->exposer_->RegisterCollectable(server->metrics_->registry());
  server->scrape_metrics_ = std::make_shared<ScrapeTimeMetrics>();
  for (const Device& device : Distinct(all_devices)) {
    server->device_losses_.push_back(
        std::make_unique<DeviceLossMetrics>(device.name(), *server->scrape_metrics_));
    if (!device.cuda) {
      continue;
    }
    auto memory = [device](bool used) {
      return [device, used]() -> std::optional<double> {
        absl::StatusOr<DeviceMemory> m = QueryDeviceMemory(device);
        if (!m.ok()) {
          return std::nullopt;  // a lost device: the sample is left out
        }
        return static_cast<double>(used ? m->used_bytes : m->total_bytes);
      };
    };
    server->scrape_metrics_->AddGauge("embedding_device_memory_used_bytes",
                                      "Memory in use on the device (all its users), in bytes.",
                                      {{"device", device.name()}}, memory(true));
    server->scrape_metrics_->AddGauge("embedding_device_memory_total_bytes",
                                      "The device's memory, in bytes.", {{"device", device.name()}},
                                      memory(false));
  }
  server->memory_returner_ =
      std::make_unique<MemoryReturner>(kMemoryReturnPeriod, kMemoryReturnThresholdBytes);
  server->scrape_metrics_->AddGroup(
      {{"embedding_memory_returned_bytes_total",
        "Resident memory given back to the system after bursts (freed memory the allocator "
        "held), in bytes.",
        prometheus::MetricType::Counter}},
      {}, [returner = server->memory_returner_.get()] {
        return std::vector<double>{static_cast<double>(returner->returned_bytes())};
      });
  server->scrape_metrics_->AddGroup(
      {{"embedding_connections_shed_total",
        "Connections closed as soon as accepted because the process was out of file "
        "descriptors (the listener keeps listening; see docs/reliability.md).",
        prometheus::MetricType::Counter}},
      {}, [] { return std::vector<double>{static_cast<double>(ShedConnectionCount())}; });
  server->exposer_->RegisterCollectable(server->scrape_metrics_);
  const std::vector<int> metrics_ports = server->exposer_->GetListeningPorts();
  server->metrics_port_ = metrics_ports.empty() ? 0 : metrics_ports.front();
  LogInfo("gRPC listening on ", grpc_address.host, ":", server->grpc_port_,
          " (health NOT_SERVING until the tables are loaded)");
  LogInfo("metrics on http://", metrics_address.host, ":", server->metrics_port_, "/metrics");

  RETURN_IF_ERROR(server->StartAdmin(config));

  RETURN_IF_ERROR(server->LoadTables(config, Distinct(all_devices), tables));
  server->service_->SetTables(&server->tables_);
  if (server->admin_ != nullptr) {
    server->admin_->SetTables(&server->tables_);
  }
  if (config.before_serving) {
    config.before_serving();
  }
  server->health_->SetServing(true);
  if (config.version_poll > absl::ZeroDuration()) {
    server->version_poller_ =
        std::thread([s = server.get(), p = config.version_poll] { s->PollVersions(p); });
    LogInfo("tables from version directories are checked for new versions every ",
            absl::FormatDuration(config.version_poll));
  }
  LogInfo("answers not yet sent are bounded to ", config.limits.max_unsent_answer_bytes, " bytes, ",
          config.limits.max_unsent_answer_bytes_per_connection,
          " per connection; gRPC's own memory to ", config.grpc_memory_bytes, " bytes");
  if (config.limits.deadline_admission_fraction > 0) {
    LogInfo("a LookUp is refused when its answer would be sent after ",
            config.limits.deadline_admission_fraction,
            " of the time left before its deadline; calls stay at most ",
            absl::FormatDuration(config.limits.max_call_time), " in the server");
  } else {
    LogInfo("admission by deadline is off; calls stay at most ",
            absl::FormatDuration(config.limits.max_call_time), " in the server");
  }
  LogInfo("serving ", server->tables_.size(), " table(s) on ", DeviceNames(Distinct(all_devices)),
          "; health SERVING");
  return server;
}

}  // namespace emb::service
