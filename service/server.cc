#include "service/server.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "grpc/grpc.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"
#include "service/log.h"
#include "service/server_credentials.h"
#include "service/status_macros.h"
#include "service/store_factory.h"

namespace emb::service {
namespace {

constexpr char kServiceName[] = "embedding.v1.EmbeddingService";

// Room in a message around the payload: field tags, the shape, the table name.
constexpr int64_t kMessageSlack = 64 << 10;

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
  if (c.inflight_batches < 1) {
    return absl::InvalidArgumentError("--inflight_batches must be at least 1");
  }
  if (c.zero_copy_max_bytes < 0) {
    return absl::InvalidArgumentError("--zero_copy_max_bytes must not be negative");
  }
  return absl::OkStatus();
}

// Opens every table file and checks its header; nothing is read beyond the headers.
absl::StatusOr<std::vector<std::unique_ptr<TableSource>>> OpenSources(const ServerConfig& c) {
  std::vector<std::unique_ptr<TableSource>> sources;
  if (c.tables.empty()) {
    if (c.demo_rows <= 0 || c.demo_dim <= 0) {
      return absl::InvalidArgumentError("--demo_table must be ROWSxDIM with both positive");
    }
    sources.push_back(TableSource::Demo("demo", c.demo_rows, c.demo_dim, c.demo_seed));
    return sources;
  }
  for (const TableSpec& spec : c.tables) {
    for (const auto& s : sources) {
      if (s->name() == spec.name) {
        return absl::InvalidArgumentError(absl::StrCat("table '", spec.name, "' given twice"));
      }
    }
    ASSIGN_OR_RETURN(std::unique_ptr<TableSource> source, TableSource::Open(spec));
    sources.push_back(std::move(source));
  }
  if (!c.default_table.empty()) {
    auto it = std::find_if(sources.begin(), sources.end(),
                           [&](const auto& s) { return s->name() == c.default_table; });
    if (it == sources.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--default_table=", c.default_table, " names no --table"));
    }
    std::rotate(sources.begin(), it, it + 1);  // the default table first, the rest in flag order
  }
  return sources;
}

EmbeddingServer* g_server_for_device_loss = nullptr;

}  // namespace

void DieOnDeviceLoss(EmbeddingServer* server, const std::string& why) {
  if (server != nullptr) {
    server->SetNotServing();
  }
  LogError("stopping: the GPU context is lost (", why,
           "); exiting with status 1 so that the orchestrator restarts the server");
  std::_Exit(1);
}

absl::StatusOr<std::unique_ptr<EmbeddingServer>> EmbeddingServer::Start(
    const ServerConfig& config) {
  RETURN_IF_ERROR(CheckConfig(config));
  ASSIGN_OR_RETURN(std::vector<std::unique_ptr<TableSource>> sources, OpenSources(config));
  ASSIGN_OR_RETURN(std::string device, ResolveDevice(config.device));

  auto server = std::unique_ptr<EmbeddingServer>(new EmbeddingServer());
  server->metrics_ = std::make_unique<Metrics>();
  server->service_ = std::make_unique<EmbeddingServiceImpl>(config.limits, server->metrics_.get());

  server->health_ = std::make_unique<HealthService>(std::vector<std::string>{kServiceName});
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
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> interceptors;
  interceptors.push_back(server->metrics_->InterceptorFactory());
  builder.experimental().SetInterceptorCreators(std::move(interceptors));
  server->server_ = builder.BuildAndStart();
  if (server->server_ == nullptr || server->grpc_port_ == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen for gRPC on ", config.grpc_address));
  }
  try {
    server->exposer_ = std::make_unique<prometheus::Exposer>(config.metrics_address);
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat("cannot serve metrics on ", config.metrics_address, ": ", e.what()));
  }
  server->exposer_->RegisterCollectable(server->metrics_->registry());
  const std::vector<int> metrics_ports = server->exposer_->GetListeningPorts();
  server->metrics_port_ = metrics_ports.empty() ? 0 : metrics_ports.front();
  const std::string grpc_host = config.grpc_address.substr(0, config.grpc_address.rfind(':'));
  const std::string metrics_host =
      config.metrics_address.substr(0, config.metrics_address.rfind(':'));
  LogInfo("gRPC listening on ", grpc_host, ":", server->grpc_port_,
          " (health NOT_SERVING until the tables are loaded)");
  LogInfo("metrics on http://", metrics_host, ":", server->metrics_port_, "/metrics");

  g_server_for_device_loss = server.get();
  RETURN_IF_ERROR(server->LoadTables(config, std::move(sources)));
  server->service_->SetTables(&server->tables_);
  server->health_->SetServing(true);
  LogInfo("serving ", server->tables_.size(), " table(s) on ", device, "; health SERVING");
  return server;
}

absl::Status EmbeddingServer::LoadTables(const ServerConfig& config,
                                         std::vector<std::unique_ptr<TableSource>> sources) {
  ASSIGN_OR_RETURN(std::string device, ResolveDevice(config.device));
  StoreOptions options;
  options.max_batch_ids = config.batcher.max_batch_ids;
  options.inflight_batches = config.inflight_batches;
  options.completion_poll = config.completion_poll;
  options.zero_copy_max_bytes = static_cast<size_t>(config.zero_copy_max_bytes);
  options.on_device_lost = [](const std::string& why) {
    DieOnDeviceLoss(g_server_for_device_loss, why);
  };
  for (const auto& source : sources) {
    const auto start = std::chrono::steady_clock::now();
    ASSIGN_OR_RETURN(std::unique_ptr<EmbeddingStore> store, CreateStore(*source, device, options));
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    LogInfo(absl::StrFormat(
        "table '%s' loaded: %d rows x %d dims, %s, %d bytes, %.3f s, %.2f GB/s, device %s, from %s",
        source->name(), source->rows(), source->dim(), DataTypeName(source->dtype()),
        source->bytes(), seconds, seconds > 0 ? source->bytes() / seconds / 1e9 : 0.0,
        store->device(), source->origin()));
    TableMetrics tm =
        metrics_->AddTable(store->name(), DataTypeName(store->dtype()), store->device(),
                           store->rows(), store->dim(), static_cast<int64_t>(store->bytes()));
    ServedTable served;
    served.batcher = std::make_unique<Batcher>(store.get(), config.batcher, tm);
    served.store = std::move(store);
    tables_.push_back(std::move(served));
  }
  return absl::OkStatus();
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
  if (health_ != nullptr) {
    health_->Shutdown();  // NOT_SERVING, and the Watch streams end
  }
  if (server_ != nullptr) {
    // gRPC stops accepting calls at once, but its Shutdown also waits, up to the deadline, for
    // clients to close their idle connections. Once every accepted call is answered there is
    // nothing left to wait for, so cut the connections then.
    std::thread closer([this, deadline] {
      while (metrics_->active_calls() > 0 && absl::Now() < deadline && !shutdown_done_.load()) {
        absl::SleepFor(absl::Milliseconds(5));
      }
      // A grace period for the last answers to leave the socket buffers and for clients to close
      // on their own after the GOAWAY.
      const absl::Time grace_end = std::min(deadline, absl::Now() + absl::Milliseconds(200));
      while (absl::Now() < grace_end && !shutdown_done_.load()) {
        absl::SleepFor(absl::Milliseconds(5));
      }
      if (!shutdown_done_.load()) {
        grpc_server_cancel_all_calls(server_->c_server());
      }
    });
    server_->Shutdown(absl::ToChronoTime(deadline));
    shutdown_done_ = true;
    closer.join();
  }
  for (ServedTable& t : tables_) {
    t.batcher->Shutdown();
  }
  if (server_ != nullptr) {
    server_->Wait();
  }
}

EmbeddingServer::~EmbeddingServer() {
  Shutdown(absl::Now());
  g_server_for_device_loss = nullptr;
}

}  // namespace emb::service
