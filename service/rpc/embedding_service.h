// EmbeddingServiceImpl: the gRPC callback service. Validates each LookUp on the gRPC thread,
// admits it under the bound on unsent answers and by its deadline (UnsentAnswers), hands it to
// its table's Batcher and returns; the batcher finishes the call. An answer that gRPC then drops
// because the call's deadline passed before it was sent is counted late
// (embedding_late_answers_total). Never blocks. A LookUp's reactor marks the call
// cancelled when gRPC reports it so (the client reset the stream, the connection died), and the
// batcher drops it when its batch forms instead of gathering its rows.
// LookUp is a raw method: it parses the request itself and sends the answer rows from the
// batch's own buffer (service/rpc/lookup_answer.h) instead of through protobuf serialization.
// Thread-safe.
#ifndef EMB_SERVICE_RPC_EMBEDDING_SERVICE_H_
#define EMB_SERVICE_RPC_EMBEDDING_SERVICE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "embedding/v1/embedding_service.grpc.pb.h"
#include "service/batch/batcher.h"
#include "service/common/clock.h"
#include "service/metrics/metrics.h"
#include "service/rpc/request_validation.h"
#include "service/rpc/unsent_answers.h"
#include "service/store/embedding_store.h"
#include "service/write/table_writer.h"

namespace emb::service {

struct ServiceLimits {
  int64_t max_request_ids = 65536;
  int64_t max_response_bytes = 128 << 20;
  // The bound on answer memory held for calls whose answers gRPC has not yet sent (from
  // admission on: queued, gathered, waiting for the client to read them), for all connections
  // together and for each connection (service/rpc/unsent_answers.h). A LookUp that would pass
  // either waits until answers ahead of it are sent; past max_waiting_calls_per_connection
  // waiting on its connection, it is refused RESOURCE_EXHAUSTED. The server requires
  // per_connection to hold one answer of max_response_bytes (its pool block), and total to hold
  // per_connection.
  int64_t max_unsent_answer_bytes = int64_t{2} << 30;
  int64_t max_unsent_answer_bytes_per_connection = int64_t{256} << 20;
  int max_waiting_calls_per_connection = 128;
  // Admission by deadline (service/rpc/unsent_answers.h): a LookUp whose answer is predicted to
  // be sent after this fraction of the time left before its deadline is refused
  // RESOURCE_EXHAUSTED at once. 0: off.
  double deadline_admission_fraction = 0;
  // The bytes admission by deadline assumes wait in a queuing connection's socket buffers
  // (UnsentAnswers::Bounds::socket_bytes).
  int64_t deadline_admission_socket_bytes = 0;
  // The longest a LookUp may stay in the server when its client set no deadline (or a later
  // one): its deadline for admission and for the queue.
  absl::Duration max_call_time = absl::Seconds(60);
  // LookUpFeatures: the most features, and ids of all features, in one call (each feature is
  // also held to max_request_ids, and the whole answer to max_response_bytes).
  int64_t max_features_per_call = 1024;
  int64_t max_feature_call_ids = int64_t{1} << 19;
};

// Where a table loaded from a version directory (DIR/N/) saves its next version.
struct TableVersions {
  std::string dir;
  std::string
      tensor;  // the tensor name of its .safetensors files (--table=NAME=DIR#TENSOR, else NAME)
  std::atomic<int64_t> version{0};   // the version served (last loaded or saved)
  std::string open_tensor;           // the tensor --table named (empty: a file's only one)
  std::optional<DataType> quantize;  // --table's quantize=, for a quantized table
  std::atomic<bool> busy{false};     // a SaveTable or a version load of the table is running
  std::atomic<bool> pinned{false};   // LoadVersion of a given version: polling leaves it
  std::atomic<int64_t> refused{0};   // the newest version polling found broken (not retried)
};

struct FeaturesService;

// One served table: its store, batcher, writer and metrics. The service holds them in flag order,
// default first.
struct ServedTable {
  std::unique_ptr<EmbeddingStore> store;
  std::unique_ptr<Batcher> batcher;
  std::unique_ptr<TableWriter> writer;  // after the batcher: it goes first
  TableMetrics metrics;
  std::unique_ptr<TableVersions> versions;  // nullptr: loaded from a file or the demo table
};

// The table `name` names in `tables` (empty: the default, the first); UNAVAILABLE while `tables`
// is nullptr (still loading), NOT_FOUND naming the tables there are.
absl::StatusOr<ServedTable*> FindServedTable(std::vector<ServedTable>* tables,
                                             const std::string& name);

// ListTables through protobuf messages, LookUp and LookUpFeatures on raw bytes.
using EmbeddingServiceBase = embedding::v1::EmbeddingService::WithCallbackMethod_ListTables<
    embedding::v1::EmbeddingService::WithRawCallbackMethod_LookUp<
        embedding::v1::EmbeddingService::WithRawCallbackMethod_LookUpFeatures<
            embedding::v1::EmbeddingService::Service>>>;

class EmbeddingServiceImpl final : public EmbeddingServiceBase {
 public:
  // `clock` (the time of deadlines) must outlive the service and every answer gRPC holds.
  EmbeddingServiceImpl(ServiceLimits limits, Metrics* metrics, Clock* clock = Clock::Real());
  ~EmbeddingServiceImpl() override;

  // Makes the tables servable; until then LookUp answers UNAVAILABLE. Call once.
  void SetTables(std::vector<ServedTable>* tables);

  // Shutdown, in two steps around gRPC's own (see EmbeddingServer::Shutdown). HoldNewCalls: calls
  // that arrive from now on are held, unanswered; calls already accepted carry on. RefuseCalls,
  // once gRPC has sent its GOAWAY: the held calls, and any later ones, get UNAVAILABLE, which
  // clients retry elsewhere. Holding keeps a caller that waits for its answer from sending a
  // call that would reach gRPC after its shutdown began, which gRPC would answer CANCELLED.
  void HoldNewCalls();
  void RefuseCalls();
  int64_t held_calls() const;

  grpc::ServerUnaryReactor* LookUp(grpc::CallbackServerContext* ctx,
                                   const grpc::ByteBuffer* request,
                                   grpc::ByteBuffer* response) override;
  // Serves through StartLookUpFeatures (service/rpc/features_call.h).
  grpc::ServerUnaryReactor* LookUpFeatures(grpc::CallbackServerContext* ctx,
                                           const grpc::ByteBuffer* request,
                                           grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* ListTables(grpc::CallbackServerContext* ctx,
                                       const embedding::v1::ListTablesRequest* request,
                                       embedding::v1::ListTablesResponse* response) override;

 private:
  // Holds or refuses the call while shutting down (see HoldNewCalls): its reactor, else nullptr.
  grpc::ServerUnaryReactor* HoldOrRefuse(grpc::CallbackServerContext* ctx);
  // Checks `request` against `table` and the limits; on error counts the rejected ids.
  absl::Status Validate(const embedding::v1::LookUpRequest& request, const ServedTable& table,
                        LookUpPlan* plan) const;

  enum class Gate { kOpen, kHold, kRefuse };

  const ServiceLimits limits_;
  Metrics* const metrics_;
  Clock* const clock_;
  UnsentAnswers unsent_answers_;
  std::unique_ptr<FeaturesService> features_;  // what LookUpFeatures calls are served with
  std::atomic<std::vector<ServedTable>*> tables_{nullptr};
  std::atomic<Gate> gate_{Gate::kOpen};  // read without mu_ on every call; changed under mu_
  mutable absl::Mutex mu_;
  std::vector<grpc::ServerUnaryReactor*> held_ ABSL_GUARDED_BY(mu_);
};

}  // namespace emb::service

#endif  // EMB_SERVICE_RPC_EMBEDDING_SERVICE_H_
