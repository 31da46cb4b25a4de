// embedding-reference-server: the gRPC-only baseline for benchmarks.
//
// Serves embedding.v1.EmbeddingService with the same server setup as embedding-server (callback
// API, no message size limits, health and reflection services) but without a table: LookUp
// checks the request with the real server's checks (service/rpc/request_validation.h), then
// answers with a prebuilt all-zero answer of the right size (len(ids) x dim elements of the
// requested dtype, float32 by default), built once per size and cached. What embedding-server adds
// on top of this server's latency is the cost of the gather, the batching and the copies.
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <pthread.h>

#include <csignal>
#include <cstdint>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "embedding/v1/embedding_service.grpc.pb.h"
#include "proto/convert/data_type_proto.h"
#include "service/common/flags_usage.h"
#include "service/rpc/grpc_status.h"
#include "service/rpc/request_validation.h"

ABSL_FLAG(std::string, grpc_address, "0.0.0.0:50052", "Address to serve on; port 0 picks one.");
ABSL_FLAG(int64_t, dim, 128, "Elements per row of the advertised table.");
ABSL_FLAG(int64_t, rows, 100000, "Rows of the advertised table; larger ids are OUT_OF_RANGE.");
ABSL_FLAG(std::string, table_name, "reference", "Name of the advertised (default) table.");
ABSL_FLAG(int64_t, max_answer_bytes, int64_t{512} << 20,
          "Largest answer; a request for more is INVALID_ARGUMENT.");

namespace emb::service {
namespace {

namespace pb = ::embedding::v1;

// The most ids of one request: embedding-server's default --max_request_ids.
constexpr int64_t kMaxRequestIds = 65536;

// At most this many answer sizes are cached; others are built per call.
constexpr size_t kMaxCachedAnswers = 64;

struct ReferenceConfig {
  std::string table_name;
  int64_t rows = 0;
  int64_t dim = 0;
  int64_t max_answer_bytes = 0;
};

// Thread-safe: the cache is behind a mutex, and answers are immutable once built.
class ReferenceService final : public pb::EmbeddingService::CallbackService {
 public:
  explicit ReferenceService(ReferenceConfig config) : config_(std::move(config)) {}

  grpc::ServerUnaryReactor* LookUp(grpc::CallbackServerContext* ctx,
                                   const pb::LookUpRequest* request,
                                   pb::LookUpResponse* response) override {
    grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
    reactor->Finish(Answer(*request, response));
    return reactor;
  }

  grpc::ServerUnaryReactor* ListTables(grpc::CallbackServerContext* ctx,
                                       const pb::ListTablesRequest* /*request*/,
                                       pb::ListTablesResponse* response) override {
    pb::TableInfo* table = response->add_tables();
    table->set_name(config_.table_name);
    table->set_rows(config_.rows);
    table->set_dim(config_.dim);
    table->set_dtype(pb::DATA_TYPE_FLOAT32);
    table->set_device("none");
    table->set_is_default(true);
    grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }

 private:
  // Checks `request` as embedding-server does and fills `response`.
  grpc::Status Answer(const pb::LookUpRequest& request, pb::LookUpResponse* response) {
    if (!request.table().empty() && request.table() != config_.table_name) {
      return grpc::Status(grpc::StatusCode::NOT_FOUND,
                          absl::StrCat("no table \"", request.table(), "\""));
    }
    const RequestTable table{config_.table_name, RowRange::Whole(config_.rows), config_.dim,
                             DataType::kFloat32};
    absl::string_view reject_reason;
    const absl::StatusOr<DataType> dtype = ValidateLookUpRequest(
        request, table, kMaxRequestIds, config_.max_answer_bytes, &reject_reason);
    if (!dtype.ok()) {
      return ToGrpcStatus(dtype.status());
    }
    const int64_t num_ids = request.ids_size();
    const int64_t element_size = static_cast<int64_t>(ElementSize(*dtype));
    const std::shared_ptr<const std::string> bytes =
        AnswerBytes(static_cast<size_t>(num_ids * config_.dim * element_size));
    response->set_embeddings(*bytes);
    if (request.shape_size() > 0) {
      *response->mutable_shape() = request.shape();
    } else {
      response->add_shape(num_ids);
    }
    response->add_shape(config_.dim);
    response->set_dtype(ToProto(*dtype));
    return grpc::Status::OK;
  }

  // All-zero bytes, which read as 0.0 in every dtype.
  std::shared_ptr<const std::string> AnswerBytes(size_t size) {
    {
      absl::ReaderMutexLock lock(&mu_);
      if (auto it = cache_.find(size); it != cache_.end()) {
        return it->second;
      }
    }
    auto bytes = std::make_shared<const std::string>(size, '\0');
    absl::MutexLock lock(&mu_);
    if (cache_.size() < kMaxCachedAnswers) {
      return cache_.emplace(size, std::move(bytes)).first->second;
    }
    return bytes;
  }

  const ReferenceConfig config_;
  absl::Mutex mu_;
  std::map<size_t, std::shared_ptr<const std::string>> cache_ ABSL_GUARDED_BY(mu_);
};

// "host:port" with the port replaced by `port`.
std::string WithPort(const std::string& address, int port) {
  const size_t colon = address.rfind(':');
  return absl::StrCat(colon == std::string::npos ? address : address.substr(0, colon), ":", port);
}

int Main(int argc, char** argv) {
  ParseFlags(argc, argv,
             "embedding-reference-server [flags]: EmbeddingService without a table, for benchmarks",
             "bench/reference/reference_server_main.cc");
  ReferenceConfig config;
  config.table_name = absl::GetFlag(FLAGS_table_name);
  config.rows = absl::GetFlag(FLAGS_rows);
  config.dim = absl::GetFlag(FLAGS_dim);
  config.max_answer_bytes = absl::GetFlag(FLAGS_max_answer_bytes);
  if (config.rows < 1 || config.dim < 1 || config.max_answer_bytes < 1) {
    std::cerr << "embedding-reference-server: --rows, --dim and --max_answer_bytes must be >= 1\n";
    return 2;
  }

  // Block the stop signals in every thread (gRPC's inherit the mask) and wait for them below.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  ReferenceService service(config);
  const std::string address = absl::GetFlag(FLAGS_grpc_address);
  int port = 0;
  grpc::ServerBuilder builder;
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &port);
  builder.SetMaxReceiveMessageSize(-1);
  builder.SetMaxSendMessageSize(-1);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    std::cerr << "embedding-reference-server: cannot listen on " << address << "\n";
    return 1;
  }
  server->GetHealthCheckService()->SetServingStatus(pb::EmbeddingService::service_full_name(),
                                                    true);
  std::cerr << "listening on " << WithPort(address, port) << std::endl;

  int signal = 0;
  sigwait(&stop_signals, &signal);
  std::cerr << "embedding-reference-server: signal " << signal << ", shutting down\n";
  server->GetHealthCheckService()->SetServingStatus(false);
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  return 0;
}

}  // namespace
}  // namespace emb::service

int main(int argc, char** argv) { return emb::service::Main(argc, argv); }
