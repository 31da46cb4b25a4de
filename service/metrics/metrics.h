// The service's Prometheus metrics: one registry, exposed over HTTP by the server.
//
// Metrics owns the registry and every metric family; per-table instances are resolved once at
// start-up (TableMetrics) so the request path never looks a label set up. Thread-safe.
#ifndef EMB_SERVICE_METRICS_METRICS_H_
#define EMB_SERVICE_METRICS_METRICS_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace emb::service {

// The metric instances of one table, labelled with its name (and device where it applies).
struct TableMetrics {
  prometheus::Histogram* queue_wait_seconds;
  prometheus::Histogram* gather_seconds;
  prometheus::Histogram* copy_in_seconds;   // stage="copy_in"
  prometheus::Histogram* copy_out_seconds;  // stage="copy_out"
  prometheus::Histogram* answer_seconds;    // stage="answer": host copies into the answers
  prometheus::Histogram* finish_seconds;    // stage="finish": the calls handed to gRPC
  prometheus::Histogram* batch_ids;
  prometheus::Histogram* batch_requests;
  prometheus::Counter* ids;
  prometheus::Counter* answer_bytes;  // rows in OK answers, in the answer's type
  prometheus::Counter* pooled_bags;   // bags pooled into one row each, in OK answers
  prometheus::Counter* dropped_deadline;
  prometheus::Counter* dropped_cancelled;
  // Answers finished OK that gRPC dropped unsent because the call's deadline passed.
  prometheus::Counter* late_answers;
  prometheus::Gauge* queue_ids;
  // The most ids the table's queue holds (--max_queue_ids); past it, calls are shed.
  prometheus::Gauge* queue_limit_ids;
  prometheus::Gauge* inflight_batches;
  // GPU memory the table takes (its rows, or its host tier's cache and slot map, and its batch
  // buffers); 0 on the CPU. Its rows' bytes are embedding_table_bytes, set by AddTable.
  prometheus::Gauge* device_bytes;
  // Row updates (EmbeddingAdminService.UpdateRows).
  prometheus::Counter* updated_rows;      // distinct rows written
  prometheus::Gauge* update_sequence;     // the last applied sequence
  prometheus::Gauge* last_update_time;    // Unix seconds of the last applied update
  prometheus::Histogram* update_seconds;  // an update's receipt until its rows are visible
  // Versions: the version served (0: not from a version directory), saves by result.
  prometheus::Gauge* version;
  prometheus::Counter* saves_ok;
  prometheus::Counter* saves_failed;
  prometheus::Counter* version_loads_ok;       // versions swapped in while serving
  prometheus::Counter* version_loads_refused;  // versions refused (the served one stayed)
};

// One device's part of a table on several devices (MultiDeviceStore), labelled with the table,
// the device and the part's index.
struct PartMetrics {
  prometheus::Histogram* gather_seconds;  // the part's gather of its share of a batch
  prometheus::Counter* ids;               // ids the part gathered
};

class Metrics {
 public:
  Metrics();
  ~Metrics();

  std::shared_ptr<prometheus::Registry> registry() const { return registry_; }

  // Registers a table's instances and sets its info gauges (queue_limit_ids and device_bytes are
  // left for the caller to set). Call once per table at start-up.
  TableMetrics AddTable(const std::string& table, const std::string& dtype,
                        const std::string& device, int64_t rows, int64_t dim, int64_t bytes);

  // Registers part `part` (on `device`) of a table on several devices, and sets its
  // embedding_part_device_bytes. Call once per part at start-up.
  PartMetrics AddTablePart(const std::string& table, const std::string& device, int part,
                           size_t device_bytes);

  // Counts one request on `table` turned away for `reason` (a label value: kReject* in
  // service/rpc/request_validation.h), and its `ids` ids (0 for a request with none, which
  // embedding_rejected_requests_total still counts).
  void RejectIds(const std::string& table, absl::string_view reason, int64_t ids);

  // A LookUpFeatures call was planned: its features and the ids of all of them.
  void RecordFeatureCall(int64_t features, int64_t ids);
  // A feature of a LookUpFeatures call on `table` failed after it was queued (the call failed
  // with it), with gRPC code `code`.
  void FeatureFailed(const std::string& table, absl::StatusCode code);

  // Bytes of answer memory held for LookUps whose answers gRPC has not yet sent or dropped
  // (service/rpc/unsent_answers.h).
  prometheus::Gauge& unsent_answer_bytes() { return unsent_answer_bytes_; }
  // LookUps waiting for room under those bounds (UnsentAnswers::Admit).
  prometheus::Gauge& unsent_answer_waiting_calls() { return unsent_answer_waiting_calls_; }

  // embedding_health_status: 1 while the server's health says SERVING, 0 otherwise (loading,
  // draining, device lost, shutting down); kept by HealthService. 0 until set.
  prometheus::Gauge& health_status() { return health_status_; }

  // Histogram buckets in seconds, 10 us to 10 s (1-2.5-5 per decade).
  static const prometheus::Histogram::BucketBoundaries& SecondsBuckets();
  // For the batch's stages (queue wait, gather, copies, answer, finish): 1 us to 10 s, finer
  // below 100 us, and a superset of SecondsBuckets().
  static const prometheus::Histogram::BucketBoundaries& StageSecondsBuckets();

  static constexpr int kNumCodes = 17;  // google.rpc.Code values 0..16

  // The per-method instances of the grpc_server_* families (and of
  // embedding_request_duration_seconds for the embedding service), for the call interceptor.
  struct MethodMetrics;
  // `full_method` as gRPC names it ("/embedding.v1.EmbeddingService/LookUp"), `type` one of
  // "unary", "client_stream", "server_stream", "bidi_stream". Looked up once per call.
  MethodMetrics& ForMethod(absl::string_view full_method, absl::string_view type);
  // A call has started: counted.
  void CallStarted(MethodMetrics& m);
  // A call's status is being sent: counted by its code, with the time since the call started.
  void RecordHandled(MethodMetrics& m, int code, double seconds);

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Histogram>& request_duration_;
  prometheus::Family<prometheus::Histogram>& queue_wait_;
  prometheus::Family<prometheus::Histogram>& gather_duration_;
  prometheus::Family<prometheus::Histogram>& stage_duration_;
  prometheus::Family<prometheus::Histogram>& batch_ids_;
  prometheus::Family<prometheus::Histogram>& batch_requests_;
  prometheus::Family<prometheus::Counter>& ids_;
  prometheus::Family<prometheus::Counter>& rejected_ids_;
  prometheus::Family<prometheus::Counter>& rejected_requests_;
  prometheus::Family<prometheus::Counter>& dropped_requests_;
  prometheus::Family<prometheus::Counter>& late_answers_;
  prometheus::Family<prometheus::Counter>& answer_bytes_;
  prometheus::Family<prometheus::Counter>& pooled_bags_;
  prometheus::Family<prometheus::Gauge>& queue_ids_;
  prometheus::Family<prometheus::Gauge>& queue_limit_ids_;
  prometheus::Family<prometheus::Gauge>& inflight_batches_;
  prometheus::Family<prometheus::Gauge>& table_info_;
  prometheus::Family<prometheus::Gauge>& table_rows_;
  prometheus::Family<prometheus::Gauge>& table_dim_;
  prometheus::Family<prometheus::Gauge>& table_bytes_;
  prometheus::Family<prometheus::Histogram>& part_gather_duration_;
  prometheus::Family<prometheus::Counter>& part_ids_;
  prometheus::Family<prometheus::Gauge>& part_device_bytes_;
  prometheus::Family<prometheus::Gauge>& table_device_bytes_;
  prometheus::Family<prometheus::Counter>& updated_rows_;
  prometheus::Family<prometheus::Gauge>& update_sequence_;
  prometheus::Family<prometheus::Gauge>& last_update_time_;
  prometheus::Family<prometheus::Histogram>& update_seconds_;
  prometheus::Family<prometheus::Gauge>& table_version_;
  prometheus::Family<prometheus::Counter>& table_saves_;
  prometheus::Family<prometheus::Counter>& version_loads_;
  prometheus::Histogram& feature_call_features_;
  prometheus::Histogram& feature_call_ids_;
  prometheus::Family<prometheus::Counter>& feature_errors_;
  prometheus::Gauge& unsent_answer_bytes_;
  prometheus::Gauge& unsent_answer_waiting_calls_;
  prometheus::Gauge& health_status_;
  prometheus::Family<prometheus::Counter>& grpc_started_;
  prometheus::Family<prometheus::Counter>& grpc_handled_;
  prometheus::Family<prometheus::Histogram>& grpc_handling_;

  absl::Mutex methods_mu_;
  absl::flat_hash_map<std::string, std::unique_ptr<MethodMetrics>> methods_
      ABSL_GUARDED_BY(methods_mu_);
};

// The gRPC status code's canonical name (google.rpc.Code), e.g. "OK", "NOT_FOUND".
absl::string_view GrpcCodeName(int code);

}  // namespace emb::service

#endif  // EMB_SERVICE_METRICS_METRICS_H_
