#include "service/server/server.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <thread>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/notification.h"
#include "grpc/grpc.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/resource_quota.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"
#include "service/common/log.h"
#include "service/common/status_macros.h"
#include "service/rpc/call_metrics.h"
#include "service/rpc/version_loader.h"
#include "service/server/accept_guard.h"
#include "service/server/cache_metrics.h"
#include "service/server/listen_address.h"
#include "service/server/server_credentials.h"
#include "service/store/multi_device_store.h"
#include "service/store/store_factory.h"
#include "service/tables/hot_ids.h"
#include "service/tables/table_versions.h"

namespace emb::service {
namespace {

constexpr char kServiceName[] = "embedding.v1.EmbeddingService";

// Shutdown: how long the service holds new calls at most (see Shutdown), and how long no new
// call must arrive before it stops holding.
constexpr absl::Duration kMaxHold = absl::Seconds(1);
constexpr absl::Duration kHoldQuiet = absl::Milliseconds(100);
// Shutdown: how long after the last answer the connections that clients left open are cut.
constexpr absl::Duration kCloseGrace = absl::Seconds(1);

// The metrics port (civetweb, under prometheus-cpp's Exposer). Each of its threads holds one
// connection until that connection's request is read, and civetweb gives a connection
// request_timeout_ms in all to send its request line and headers (not per byte), then closes it.
// With civetweb's defaults (2 threads, 30 s) two slow clients blocked every scrape for 30 s at a
// time; with 8 threads and 30 s, 9 or more did (docs/reliability.md, issue 41). Now 16 slow
// connections leave 16 threads free for scrapes, and each is closed after 5 s (a scrape is read
// and answered in milliseconds); a scrape that finds every thread taken waits in civetweb's
// queue until one of them is closed. Keep-alive stays off (civetweb's default): a connection is
// closed after its answer, so an idle one holds no thread.
constexpr int kMetricsThreads = 32;
constexpr int kMetricsRequestTimeoutMs = 5000;

// Room in a message around the payload: field tags, the shape, the table name.
constexpr int64_t kMessageSlack = 64 << 10;

// The most bytes of headers one call may send (GRPC_ARG_MAX_METADATA_SIZE).
constexpr int kMaxMetadataBytes = 8 << 10;

// How often, and past how much memory freed and held by the allocator, it is given back to the
// system (MemoryReturner).
constexpr absl::Duration kMemoryReturnPeriod = absl::Seconds(5);
constexpr uint64_t kMemoryReturnThresholdBytes = uint64_t{64} << 20;

// The admin listener's calls at once on one connection: a writer needs one (UpdateRows) or a few
// (saves and loads beside it); a client past this waits for a stream, it is not refused.
constexpr int kAdminStreamsPerConnection = 4;

// The admin listener's memory quota (gRPC's read buffers and calls, every connection together):
// room for the largest message on each stream of one connection.
int64_t AdminMemoryQuotaBytes(int64_t max_message_bytes) {
  return kAdminStreamsPerConnection * max_message_bytes;
}

// The settings besides the listen addresses (Start parses those first).
absl::Status CheckConfig(const ServerConfig& c) {
  if (c.batcher.max_batch_ids <= 0 || c.limits.max_request_ids <= 0 ||
      c.limits.max_request_ids > c.batcher.max_batch_ids) {
    return absl::InvalidArgumentError(absl::StrCat("--max_request_ids (", c.limits.max_request_ids,
                                                   ") must be in [1, --max_batch_ids (",
                                                   c.batcher.max_batch_ids, ")]"));
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

// `status` of opening the table file `path`; where the file is missing and its path holds
// ",WORD=", which looks like a misspelt option of --table, with a hint saying so.
absl::Status WithOptionHint(const absl::Status& status, absl::string_view path) {
  const size_t comma = path.rfind(',');
  if (status.code() != absl::StatusCode::kNotFound || comma == absl::string_view::npos) {
    return status;
  }
  const absl::string_view option = path.substr(comma + 1);
  const size_t eq = option.find('=');
  if (eq == absl::string_view::npos || eq == 0 ||
      !std::all_of(option.begin(), option.begin() + eq,
                   [](char ch) { return absl::ascii_islower(ch) || ch == '_'; })) {
    return status;
  }
  return absl::NotFoundError(
      absl::StrCat(status.message(), " (is ',", option.substr(0, eq),
                   "=' meant as an option? --table takes quantize=, gpu_budget=, hot_ids=, shard=, "
                   "placement= and devices=; anything else "
                   "after a comma is part of the path)"));
}

// "replicas" or "rows" (`what`: the flag or option that said it).
absl::StatusOr<Placement> ParsePlacement(absl::string_view text, absl::string_view what) {
  if (text == "replicas") {
    return Placement::kReplicated;
  }
  if (text == "rows") {
    return Placement::kRowSharded;
  }
  return absl::InvalidArgumentError(absl::StrCat(what, "=", text, ": expected replicas or rows"));
}

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

// "cuda:0,cuda:1".
std::string DeviceNames(const std::vector<Device>& devices) {
  return absl::StrJoin(devices, ",",
                       [](std::string* out, const Device& d) { out->append(d.name()); });
}

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

// The admin flags: consistent, and safe for the address they serve; checked before any port
// opens, so that a refused admin set-up never leaves a gRPC port open for a moment.
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
  const int64_t max_receive = config.limits.max_request_ids * 10 + kMessageSlack;
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
  // What a client can make the server hold (issue 21). gRPC 1.51 has no
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

// Opens every table file and checks its header, and reads each table's hot ids; nothing else is
// read.
absl::StatusOr<std::vector<EmbeddingServer::OpenedTable>> EmbeddingServer::OpenTables(
    const ServerConfig& c) {
  std::vector<OpenedTable> tables;
  if (c.tables.empty()) {
    int64_t bytes = 0;
    if (c.demo_rows <= 0 || c.demo_dim <= 0 ||
        __builtin_mul_overflow(c.demo_rows, c.demo_dim * int64_t{sizeof(float)}, &bytes)) {
      return absl::InvalidArgumentError(absl::StrCat("--demo_table=", c.demo_rows, "x", c.demo_dim,
                                                     ": ROWS and DIM must be positive and the "
                                                     "table's bytes must fit in 64 bits"));
    }
    OpenedTable demo;
    if (c.shard.has_value()) {
      ASSIGN_OR_RETURN(demo.source, TableSource::DemoShard("demo", c.demo_rows, c.demo_dim,
                                                           c.demo_seed, *c.shard));
    } else {
      demo.source = TableSource::Demo("demo", c.demo_rows, c.demo_dim, c.demo_seed);
    }
    tables.push_back(std::move(demo));
  }
  for (TableSpec spec : c.tables) {
    if (!spec.shard.has_value()) {
      spec.shard = c.shard;
    }
    for (const OpenedTable& t : tables) {
      if (t.source->name() == spec.name) {
        return absl::InvalidArgumentError(absl::StrCat("table '", spec.name, "' given twice"));
      }
    }
    OpenedTable table;
    table.gpu_budget_bytes = spec.gpu_budget_bytes;
    table.placement = spec.placement;
    table.devices_option = spec.devices;
    table.hot_ids_path = spec.hot_ids_path;
    if (IsDirectory(spec.path)) {
      // A version directory: what an earlier run's save left half-written goes first (a save
      // of another server sharing the directory holds its own locked, and it stays).
      if (absl::StatusOr<StaleTemporaries> stale = RemoveStaleTemporaries(spec.path); stale.ok()) {
        for (const std::string& path : stale->removed) {
          LogInfo("table '", spec.name, "': removed ", path,
                  ", the temporary directory of a save that did not finish");
        }
        for (const std::string& line : stale->kept) {
          LogInfo("table '", spec.name, "': left ", line);
        }
      }
      // Then the newest version that opens; each newer one refused is logged.
      std::vector<std::string> skipped;
      absl::StatusOr<std::unique_ptr<TableSource>> source = OpenNewestVersion(spec, &skipped);
      for (const std::string& line : skipped) {
        LogError(line);
      }
      RETURN_IF_ERROR(source.status());
      table.source = *std::move(source);
    } else {
      absl::StatusOr<std::unique_ptr<TableSource>> source = TableSource::Open(spec);
      if (!source.ok()) {
        return WithOptionHint(source.status(), spec.path);
      }
      table.source = *std::move(source);
    }
    if (!spec.hot_ids_path.empty()) {
      absl::StatusOr<std::vector<int64_t>> ids =
          ReadHotIds(spec.hot_ids_path, table.source->whole_rows());
      if (!ids.ok()) {
        // The message starts with the file's path.
        return absl::Status(
            ids.status().code(),
            absl::StrCat("table '", spec.name, "': hot_ids=", ids.status().message()));
      }
      // The ids are global: a shard keeps its own, counted from its first row.
      const int64_t first = table.source->first_row();
      const int64_t rows = table.source->rows();
      for (const int64_t id : *ids) {
        if (id >= first && id - first < rows) {
          table.hot_ids.push_back(id - first);
        }
      }
    }
    tables.push_back(std::move(table));
  }
  if (!c.default_table.empty()) {
    auto it = std::find_if(tables.begin(), tables.end(),
                           [&](const auto& t) { return t.source->name() == c.default_table; });
    if (it == tables.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--default_table=", c.default_table, " names no --table",
                       c.tables.empty() ? " (without --table the only table is 'demo')" : ""));
    }
    std::rotate(tables.begin(), it, it + 1);  // the default table first, the rest in flag order
  }
  return tables;
}

absl::Status EmbeddingServer::LoadTables(const ServerConfig& config,
                                         const std::vector<Device>& all_devices,
                                         std::vector<OpenedTable>& tables) {
  StoreOptions options = config.store;
  options.max_batch_ids = config.batcher.max_batch_ids;
  // Each device's stores report its loss to its own DeviceLossMetrics.
  auto on_device_lost = [this, report = config.store.on_device_lost](const Device& device) {
    DeviceLossMetrics* loss = nullptr;
    for (size_t i = 0; i < device_losses_.size(); ++i) {
      if (device_losses_[i]->device() == device.name()) {
        loss = device_losses_[i].get();
      }
    }
    return [this, report, loss](const std::string& why) {
      SetNotServing();  // before the report, which ends the process
      // Until the process ends, once a scrape has recorded the loss (WaitUntilScraped), new
      // calls get UNAVAILABLE, which clients retry elsewhere as they would once the process is
      // gone.
      service_->RefuseCalls();
      loss->SetLost(why);
      loss->WaitUntilScraped();
      report(why);
    };
  };
  // Answers in pinned memory that every GPU of the process sees (portable), or ordinary memory
  // where no table is on a GPU.
  const auto first_gpu =
      std::find_if(all_devices.begin(), all_devices.end(), [](const Device& d) { return d.cuda; });
  const bool any_cuda = first_gpu != all_devices.end();
  answer_pool_ = std::make_unique<AnswerBufferPool>(
      config.answer_pool_bytes, CreateAnswerMemory(any_cuda ? *first_gpu : all_devices.front()));
  BatcherOptions batcher_options = config.batcher;
  batcher_options.answer_pool = answer_pool_.get();
  if (!any_cuda && (config.gpu_memory_budget_bytes > 0 || !config.store.host_tier)) {
    LogInfo("--gpu_memory_budget and --host_tier have no effect on ", DeviceNames(all_devices),
            ": the CPU store serves every table from host memory");
  }
  // What --gpu_memory_budget leaves on each device for the tables not placed yet, and what the
  // others took.
  std::vector<std::pair<std::string, size_t>> device_left;
  device_left.reserve(all_devices.size());
  for (const Device& d : all_devices) {
    device_left.emplace_back(d.name(), config.gpu_memory_budget_bytes);
  }
  auto left_on = [&](const Device& d) -> size_t& {
    return std::find_if(device_left.begin(), device_left.end(),
                        [&](const auto& e) { return e.first == d.name(); })
        ->second;
  };
  std::vector<std::string> placed;
  for (OpenedTable& t : tables) {
    const TableSource& source = *t.source;
    const std::vector<Device>& devices = t.devices;
    const bool on_gpu =
        std::any_of(devices.begin(), devices.end(), [](const Device& d) { return d.cuda; });
    ASSIGN_OR_RETURN(
        const Placement placement,
        t.placement.empty()
            ? ParsePlacement(config.placement, "--placement")
            : ParsePlacement(t.placement, absl::StrCat("table '", source.name(), "': placement")));
    // One device's store of `part` (the table, or its slice of the rows).
    auto load_on = [&](const TableSource& part,
                       const Device& device) -> absl::StatusOr<std::unique_ptr<EmbeddingStore>> {
      StoreOptions part_options = options;
      part_options.on_device_lost = on_device_lost(device);
      size_t& left = left_on(device);
      if (device.cuda) {
        part_options.gpu_budget_bytes = t.gpu_budget_bytes;
        if (config.gpu_memory_budget_bytes > 0) {
          // With nothing left, a budget of one byte: the table goes to the host tier, where the
          // store refuses it naming the GPU memory it would still need.
          const size_t budget = std::max<size_t>(left, 1);
          part_options.gpu_budget_bytes =
              t.gpu_budget_bytes > 0 ? std::min(t.gpu_budget_bytes, budget) : budget;
        }
        // The hot ids of the part's rows, counted from its first.
        const int64_t first = part.first_row() - source.first_row();
        part_options.hot_ids.clear();
        for (const int64_t id : t.hot_ids) {
          if (id >= first && id - first < part.rows()) {
            part_options.hot_ids.push_back(id - first);
          }
        }
      } else if (t.gpu_budget_bytes > 0 || !t.hot_ids_path.empty()) {
        LogInfo("table '", source.name(), "': gpu_budget= and hot_ids= are checked but have no ",
                "effect on ", device.name(), ": the CPU store serves the table from host memory");
      }
      absl::StatusOr<std::unique_ptr<EmbeddingStore>> created =
          CreateStore(part, device, part_options);
      if (!created.ok()) {
        if (device.cuda && config.gpu_memory_budget_bytes > 0 &&
            created.status().code() == absl::StatusCode::kResourceExhausted) {
          return absl::ResourceExhaustedError(absl::StrCat(
              created.status().message(), " (--gpu_memory_budget=", config.gpu_memory_budget_bytes,
              " left it ", left, " bytes on ", device.name(),
              placed.empty() ? "" : absl::StrCat(" after ", absl::StrJoin(placed, ", ")), ")"));
        }
        return created.status();
      }
      left -= std::min(left, (*created)->info().device_bytes);
      placed.push_back(absl::StrCat("'", source.name(), "' took ", (*created)->info().device_bytes,
                                    " on ", device.name()));
      return created;
    };
    const absl::Time start = options.clock->Now();
    std::unique_ptr<EmbeddingStore> store;
    MultiDeviceStore* multi = nullptr;
    if (devices.size() == 1) {
      ASSIGN_OR_RETURN(store, load_on(source, devices.front()));
    } else {
      std::vector<std::string> names;
      names.reserve(devices.size());
      for (const Device& d : devices) {
        names.push_back(d.name());
      }
      ASSIGN_OR_RETURN(
          std::unique_ptr<MultiDeviceStore> m,
          MultiDeviceStore::Create(source, placement, names, [&](const TableSource& part, int k) {
            return load_on(part, devices[k]);
          }));
      multi = m.get();
      store = std::move(m);
    }
    const double seconds = SecondsSince(options.clock, start);
    const TableInfo& table = store->info();
    std::string where = "in host memory";
    if (!table.parts.empty()) {
      where = absl::StrCat(PlacementName(table.placement), " over ", table.parts.size(),
                           " devices (", table.device_bytes, " bytes of GPU memory in all)");
    } else if (on_gpu && table.host_tier) {
      where = absl::StrCat("in pinned host memory with a GPU cache of ", table.cache_rows,
                           " rows (", table.device_bytes, " bytes of GPU memory)");
    } else if (on_gpu) {
      where = absl::StrCat("on the device (", table.device_bytes, " bytes of GPU memory)");
    }
    LogInfo(absl::StrFormat(
        "table '%s' loaded: %d rows x %d dims%s, %s%s, %d bytes, %.3f s, %.2f GB/s, device %s, "
        "%s, from %s%s",
        source.name(), source.rows(), source.dim(),
        source.shard().has_value()
            ? absl::StrFormat(" (shard %d/%d: rows %d..%d of %d)", source.shard()->index,
                              source.shard()->count, source.first_row(),
                              source.first_row() + source.rows() - 1, source.whole_rows())
            : "",
        DataTypeName(source.dtype()),
        source.stored_dtype() != source.dtype()
            ? absl::StrCat(" (quantized from ", DataTypeName(source.stored_dtype()), ")")
            : "",
        source.bytes(), seconds,
        seconds > 0 ? static_cast<double>(source.bytes()) / seconds / 1e9 : 0.0, table.device,
        where, source.origin(),
        source.version() > 0
            ? absl::StrFormat(" (version %d, sequence %d)", source.version(), source.sequence())
            : ""));
    for (size_t k = 0; k < table.parts.size(); ++k) {
      const DevicePart& part = table.parts[k];
      LogInfo(absl::StrFormat("table '%s' part %d on %s: rows %d..%d, %s, %d bytes of GPU memory",
                              table.name, k, part.device, part.first_row,
                              part.first_row + part.rows - 1,
                              part.host_tier         ? "in pinned host memory with a GPU cache"
                              : part.device == "cpu" ? "in host memory"
                                                     : "on the device",
                              part.device_bytes));
    }
    if (on_gpu && !table.host_tier && !t.hot_ids_path.empty()) {
      LogInfo("table '", table.name, "': hot_ids=", t.hot_ids_path,
              " has no effect: every row is on the device");
    }
    if (multi != nullptr) {
      std::vector<PartMetrics> parts;
      for (size_t k = 0; k < table.parts.size(); ++k) {
        parts.push_back(metrics_->AddTablePart(table.name, table.parts[k].device,
                                               static_cast<int>(k), table.parts[k].device_bytes));
      }
      multi->set_part_observer([parts](int k, const StageTimes& times, size_t ids) {
        parts[k].gather_seconds->Observe(times.gather);
        parts[k].ids->Increment(static_cast<double>(ids));
      });
    }
    AddCacheMetrics(*store, *scrape_metrics_);
    TableMetrics tm =
        metrics_->AddTable(table.name, DataTypeName(table.dtype), table.device, table.rows,
                           table.dim, static_cast<int64_t>(table.bytes()));
    tm.queue_limit_ids->Set(static_cast<double>(config.batcher.max_queue_ids));
    tm.device_bytes->Set(static_cast<double>(table.device_bytes));
    ServedTable served;
    batcher_options.initial_sequence = source.sequence();
    tm.update_sequence->Set(static_cast<double>(source.sequence()));
    if (source.version() > 0) {
      served.versions = std::make_unique<TableVersions>();
      served.versions->dir = source.versions_dir();
      served.versions->tensor = source.tensor().empty() ? source.name() : source.tensor();
      served.versions->open_tensor = source.tensor();
      if (IsQuantized(source.dtype())) {
        served.versions->quantize = source.dtype();  // every version is served quantized
      }
      served.versions->version.store(source.version());
      tm.version->Set(static_cast<double>(source.version()));
    }
    served.batcher = std::make_unique<Batcher>(store.get(), batcher_options, tm, options.clock);
    served.store = std::move(store);
    served.metrics = tm;
    tables_.push_back(std::move(served));
  }
  return absl::OkStatus();
}

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
  // What a caller can make the admin listener hold (issue 41): a caller without a certificate
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

void EmbeddingServer::SetNotServing() {
  if (health_ != nullptr) {
    health_->SetServing(false);
  }
}

void EmbeddingServer::Shutdown(absl::Time deadline) {
  if (shut_down_) {
    return;
  }
  shut_down_ = true;
  stop_polling_.Notify();
  if (version_poller_.joinable()) {
    version_poller_.join();
  }
  if (health_ != nullptr) {
    health_->Shutdown();  // NOT_SERVING, and the Watch streams end
  }
  if (admin_server_ != nullptr) {
    // Writes stop first: each stream ends UNAVAILABLE once the message being applied, if any,
    // is answered (the batchers still run), so every answered message is applied.
    admin_->Shutdown();
    admin_server_->Shutdown(absl::ToChronoTime(deadline));
    admin_server_->Wait();
  }
  if (server_ != nullptr) {
    // gRPC's own shutdown sends GOAWAY, then answers CANCELLED to every call that reaches it
    // before the client has read the GOAWAY (grpc/grpc#41785). So first the service holds new
    // calls unanswered until the calls it had accepted are answered and the callers that waited
    // for them have sent their next call: then no such caller has a call on the way. gRPC's
    // shutdown starts (the listener closes, GOAWAY goes out on every connection, ahead of
    // anything written after it), and only then are the held calls answered UNAVAILABLE: their
    // callers retry on a new connection, which goes elsewhere.
    service_->HoldNewCalls();
    WaitUntilOnlyHeldCallsRemain(std::min(deadline, absl::Now() + kMaxHold));
    grpc_completion_queue* cq = grpc_completion_queue_create_for_next(nullptr);
    grpc_server_shutdown_and_notify(server_->c_server(), cq, /*tag=*/nullptr);
    service_->RefuseCalls();
    // gRPC's Shutdown returns once every call is answered and every connection is closed. A
    // client closes its connection once it has read the GOAWAY and its answers, but an idle one
    // may not read for seconds (a synchronous client polls only during its calls), so the
    // connections still open kCloseGrace after the last answer are cut: by then any answer
    // written to them has long been read, and no new call can reach a handler.
    absl::Notification done;
    std::thread closer([this, deadline, &done] {
      while (active_calls_.count() > 0 && absl::Now() < deadline && !done.HasBeenNotified()) {
        absl::SleepFor(absl::Milliseconds(1));  // polled: gRPC has no "no call in flight" event
      }
      if (!done.WaitForNotificationWithTimeout(
              std::max(absl::ZeroDuration(), std::min(kCloseGrace, deadline - absl::Now())))) {
        grpc_server_cancel_all_calls(server_->c_server());
      }
    });
    server_->Shutdown(absl::ToChronoTime(deadline));
    done.Notify();
    closer.join();
    grpc_completion_queue_shutdown(cq);
    while (grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_REALTIME), nullptr).type !=
           GRPC_QUEUE_SHUTDOWN) {
    }
    grpc_completion_queue_destroy(cq);
  }
  for (ServedTable& t : tables_) {
    t.batcher->Shutdown();
  }
  if (server_ != nullptr) {
    server_->Wait();
  }
}

void EmbeddingServer::WaitUntilOnlyHeldCallsRemain(absl::Time until) const {
  // Polled: gRPC offers no event for "no call in flight"; this runs once, at shutdown.
  int64_t held = -1;
  absl::Time changed = absl::Now();
  while (absl::Now() < until) {
    const int64_t now_held = service_->held_calls();
    if (now_held != held) {
      held = now_held;
      changed = absl::Now();
    }
    if (active_calls_.count() <= held && absl::Now() - changed >= kHoldQuiet) {
      return;
    }
    absl::SleepFor(absl::Milliseconds(1));
  }
}

EmbeddingServer::~EmbeddingServer() {
  Shutdown(absl::Now());
  // The metrics port closes before the tables go: the cache metrics read their stores.
  exposer_.reset();
}

}  // namespace emb::service
