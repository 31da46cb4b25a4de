#include "service/metrics/metrics.h"

#include <atomic>
#include <utility>

#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "prometheus/counter.h"
#include "prometheus/labels.h"

namespace emb::service {
namespace {

using prometheus::BuildCounter;
using prometheus::BuildGauge;
using prometheus::BuildHistogram;

prometheus::Histogram::BucketBoundaries PowersOfTwo(int max_exponent) {
  prometheus::Histogram::BucketBoundaries b;
  for (int e = 0; e <= max_exponent; ++e) {
    b.push_back(static_cast<double>(int64_t{1} << e));
  }
  return b;
}

const char* const kCodeNames[] = {
    "OK",        "CANCELLED",      "UNKNOWN",           "INVALID_ARGUMENT",   "DEADLINE_EXCEEDED",
    "NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
    "ABORTED",   "OUT_OF_RANGE",   "UNIMPLEMENTED",     "INTERNAL",           "UNAVAILABLE",
    "DATA_LOSS", "UNAUTHENTICATED"};

}  // namespace

absl::string_view GrpcCodeName(int code) {
  if (code < 0 || code >= Metrics::kNumCodes) {
    return "UNKNOWN";
  }
  return kCodeNames[code];
}

const prometheus::Histogram::BucketBoundaries& Metrics::SecondsBuckets() {
  static const auto* buckets = new prometheus::Histogram::BucketBoundaries{
      1e-5,   2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2,
      2.5e-2, 5e-2,   0.1,  0.25, 0.5,    1,    2.5,  5,      10};
  return *buckets;
}

const prometheus::Histogram::BucketBoundaries& Metrics::StageSecondsBuckets() {
  // Every bound of SecondsBuckets(), so that a rule or panel written for those still finds its
  // `le`, and below 100 us steps of 25% or less: the H200 gathers small batches in 4 to 15 us.
  static const auto* buckets = [] {
    auto* b = new prometheus::Histogram::BucketBoundaries{
        1e-6,    2e-6,   3e-6, 4e-6,   5e-6, 6e-6, 7e-6, 8e-6, 9e-6,   1e-5,
        1.25e-5, 1.5e-5, 2e-5, 2.5e-5, 3e-5, 4e-5, 5e-5, 6e-5, 7.5e-5, 1e-4};
    for (double bound : SecondsBuckets()) {
      if (bound > b->back()) {
        b->push_back(bound);
      }
    }
    return b;
  }();
  return *buckets;
}

Metrics::Metrics()
    : registry_(std::make_shared<prometheus::Registry>()),
      request_duration_(BuildHistogram()
                            .Name("embedding_request_duration_seconds")
                            .Help("Time from receiving an EmbeddingService call to its status, "
                                  "by method and gRPC code.")
                            .Register(*registry_)),
      queue_wait_(BuildHistogram()
                      .Name("embedding_queue_wait_seconds")
                      .Help("Time a LookUp waited in its table's queue before its batch ran.")
                      .Register(*registry_)),
      gather_duration_(BuildHistogram()
                           .Name("embedding_gather_duration_seconds")
                           .Help("Time of one batch's gather on its device.")
                           .Register(*registry_)),
      stage_duration_(BuildHistogram()
                          .Name("embedding_batch_stage_duration_seconds")
                          .Help("Time of each stage of a batch after the queue: copy_in (ids to "
                                "the device), gather, copy_out (rows to the host), answer (rows "
                                "copied on the host into the callers' answer buffers; 0 where "
                                "the device wrote them there), finish (the calls handed to "
                                "gRPC, which may write them to the socket).")
                          .Register(*registry_)),
      batch_ids_(BuildHistogram()
                     .Name("embedding_batch_ids")
                     .Help("Ids in each formed batch.")
                     .Register(*registry_)),
      batch_requests_(BuildHistogram()
                          .Name("embedding_batch_requests")
                          .Help("Requests coalesced into each formed batch.")
                          .Register(*registry_)),
      ids_(BuildCounter()
               .Name("embedding_ids_total")
               .Help("Ids looked up (in batches that ran).")
               .Register(*registry_)),
      rejected_ids_(BuildCounter()
                        .Name("embedding_rejected_ids_total")
                        .Help("Ids in requests turned away before batching, by reason.")
                        .Register(*registry_)),
      rejected_requests_(BuildCounter()
                             .Name("embedding_rejected_requests_total")
                             .Help("Requests turned away before batching, by reason (those "
                                   "with no ids included).")
                             .Register(*registry_)),
      dropped_requests_(BuildCounter()
                            .Name("embedding_dropped_requests_total")
                            .Help("Queued requests dropped before their batch ran: deadline "
                                  "passed or call cancelled.")
                            .Register(*registry_)),
      late_answers_(BuildCounter()
                        .Name("embedding_late_answers_total")
                        .Help("LookUps answered OK whose answer gRPC had not finished sending "
                              "when the call's deadline passed: the work went to an answer "
                              "nobody received.")
                        .Register(*registry_)),
      answer_bytes_(BuildCounter()
                        .Name("embedding_answer_bytes_total")
                        .Help("Bytes of rows in LookUp answers handed to gRPC, in the type each "
                              "answer was asked in (a bfloat16 answer from a float32 table counts "
                              "2 bytes a value).")
                        .Register(*registry_)),
      pooled_bags_(BuildCounter()
                       .Name("embedding_pooled_bags_total")
                       .Help("Bags of ids pooled (summed or averaged) into one row each in OK "
                             "LookUp answers; their ids count in embedding_ids_total.")
                       .Register(*registry_)),
      queue_ids_(BuildGauge()
                     .Name("embedding_queue_ids")
                     .Help("Ids waiting in the table's queue.")
                     .Register(*registry_)),
      queue_limit_ids_(BuildGauge()
                           .Name("embedding_queue_limit_ids")
                           .Help("The most ids the table's queue holds (--max_queue_ids); "
                                 "calls that would take it past are shed (RESOURCE_EXHAUSTED).")
                           .Register(*registry_)),
      inflight_batches_(BuildGauge()
                            .Name("embedding_inflight_batches")
                            .Help("Batches handed to the store and not yet answered.")
                            .Register(*registry_)),
      table_info_(BuildGauge()
                      .Name("embedding_table_info")
                      .Help("1 for each loaded table, labelled with its dtype and device.")
                      .Register(*registry_)),
      table_rows_(BuildGauge()
                      .Name("embedding_table_rows")
                      .Help("Rows of each loaded table.")
                      .Register(*registry_)),
      table_dim_(BuildGauge()
                     .Name("embedding_table_dim")
                     .Help("Elements per row of each loaded table.")
                     .Register(*registry_)),
      table_bytes_(BuildGauge()
                       .Name("embedding_table_bytes")
                       .Help("Bytes of each loaded table's rows, where they live (host memory "
                             "for a host-tier table; a quantized table's rows with their scales "
                             "and biases).")
                       .Register(*registry_)),
      part_gather_duration_(BuildHistogram()
                                .Name("embedding_part_gather_duration_seconds")
                                .Help("A table on several devices: time of one part's gather of "
                                      "its share of a batch, by device and part.")
                                .Register(*registry_)),
      part_ids_(BuildCounter()
                    .Name("embedding_part_ids_total")
                    .Help("A table on several devices: ids gathered by each part, by device and "
                          "part (replicas: how the batches were shared).")
                    .Register(*registry_)),
      part_device_bytes_(BuildGauge()
                             .Name("embedding_part_device_bytes")
                             .Help("A table on several devices: GPU memory each part takes, by "
                                   "device and part; 0 on the CPU.")
                             .Register(*registry_)),
      table_device_bytes_(BuildGauge()
                              .Name("embedding_table_device_bytes")
                              .Help("GPU memory each loaded table takes: its rows, or its host "
                                    "tier's cache and slot map, and its batch buffers; 0 on the "
                                    "CPU.")
                              .Register(*registry_)),
      updated_rows_(BuildCounter()
                        .Name("embedding_updated_rows_total")
                        .Help("Rows written by UpdateRows (distinct ids of each applied "
                              "message).")
                        .Register(*registry_)),
      update_sequence_(BuildGauge()
                           .Name("embedding_table_update_sequence")
                           .Help("The sequence of the last UpdateRows message applied to the "
                                 "table (0: none since it was loaded).")
                           .Register(*registry_)),
      last_update_time_(BuildGauge()
                            .Name("embedding_table_last_update_timestamp_seconds")
                            .Help("When the last UpdateRows message was applied to the table, in "
                                  "Unix seconds (0: none since it was loaded).")
                            .Register(*registry_)),
      update_seconds_(BuildHistogram()
                          .Name("embedding_update_visible_seconds")
                          .Help("Time from an UpdateRows message's arrival at the server to its "
                                "rows being visible to lookups.")
                          .Register(*registry_)),
      table_version_(BuildGauge()
                         .Name("embedding_table_version")
                         .Help("The version served, for a table loaded from a version directory "
                               "(DIR/N/); 0 otherwise.")
                         .Register(*registry_)),
      table_saves_(BuildCounter()
                       .Name("embedding_table_saves_total")
                       .Help("SaveTable calls that wrote a version (result=\"ok\") or failed "
                             "(result=\"failed\").")
                       .Register(*registry_)),
      version_loads_(BuildCounter()
                         .Name("embedding_table_version_loads_total")
                         .Help("Versions of a table loaded while it served, by result: "
                               "\"loaded\" (swapped in) or \"refused\" (missing, broken, "
                               "another shape, no room beside the served one: it stayed).")
                         .Register(*registry_)),
      feature_call_features_(BuildHistogram()
                                 .Name("embedding_feature_call_features")
                                 .Help("Features in each LookUpFeatures call that passed its "
                                       "checks.")
                                 .Register(*registry_)
                                 .Add({}, PowersOfTwo(12))),
      feature_call_ids_(BuildHistogram()
                            .Name("embedding_feature_call_ids")
                            .Help("Ids of all features of each LookUpFeatures call that passed "
                                  "its checks.")
                            .Register(*registry_)
                            .Add({}, PowersOfTwo(20))),
      feature_errors_(BuildCounter()
                          .Name("embedding_feature_errors_total")
                          .Help("Features of LookUpFeatures calls that failed after they were "
                                "queued (each fails its call), by table and gRPC code.")
                          .Register(*registry_)),
      unsent_answer_bytes_(BuildGauge()
                               .Name("embedding_unsent_answer_bytes")
                               .Help("Bytes of answer memory held for LookUps from admission "
                                     "until gRPC has sent (or dropped) their answers; bounded "
                                     "by --max_unsent_answer_bytes.")
                               .Register(*registry_)
                               .Add({})),
      unsent_answer_waiting_calls_(
          BuildGauge()
              .Name("embedding_unsent_answer_waiting_calls")
              .Help("LookUps waiting for room for their answers under "
                    "--max_unsent_answer_bytes or --max_unsent_answer_bytes_per_connection "
                    "(admitted once answers ahead of them are sent; not refused).")
              .Register(*registry_)
              .Add({})),
      health_status_(BuildGauge()
                         .Name("embedding_health_status")
                         .Help("1 while the server's gRPC health says SERVING; 0 while it says "
                               "NOT_SERVING: tables loading, draining after a stop signal, device "
                               "lost, shutting down.")
                         .Register(*registry_)
                         .Add({})),
      grpc_started_(BuildCounter()
                        .Name("grpc_server_started_total")
                        .Help("RPCs started on the server.")
                        .Register(*registry_)),
      grpc_handled_(BuildCounter()
                        .Name("grpc_server_handled_total")
                        .Help("RPCs completed on the server, regardless of success or failure.")
                        .Register(*registry_)),
      grpc_handling_(BuildHistogram()
                         .Name("grpc_server_handling_seconds")
                         .Help("Response latency of RPCs handled by the server.")
                         .Register(*registry_)) {}

Metrics::~Metrics() = default;

PartMetrics Metrics::AddTablePart(const std::string& table, const std::string& device, int part,
                                  size_t device_bytes) {
  const prometheus::Labels labels{
      {"table", table}, {"device", device}, {"part", std::to_string(part)}};
  part_device_bytes_.Add(labels).Set(static_cast<double>(device_bytes));
  return PartMetrics{.gather_seconds = &part_gather_duration_.Add(labels, StageSecondsBuckets()),
                     .ids = &part_ids_.Add(labels)};
}

TableMetrics Metrics::AddTable(const std::string& table, const std::string& dtype,
                               const std::string& device, int64_t rows, int64_t dim,
                               int64_t bytes) {
  const auto& s = StageSecondsBuckets();
  auto stage = [&](const char* name) {
    return &stage_duration_.Add({{"table", table}, {"stage", name}}, s);
  };
  table_info_.Add({{"table", table}, {"dtype", dtype}, {"device", device}}).Set(1);
  table_rows_.Add({{"table", table}}).Set(static_cast<double>(rows));
  table_dim_.Add({{"table", table}}).Set(static_cast<double>(dim));
  table_bytes_.Add({{"table", table}}).Set(static_cast<double>(bytes));
  return TableMetrics{
      .queue_wait_seconds = &queue_wait_.Add({{"table", table}}, s),
      .gather_seconds = &gather_duration_.Add({{"table", table}, {"device", device}}, s),
      .copy_in_seconds = stage("copy_in"),
      .copy_out_seconds = stage("copy_out"),
      .answer_seconds = stage("answer"),
      .finish_seconds = stage("finish"),
      .batch_ids = &batch_ids_.Add({{"table", table}}, PowersOfTwo(20)),
      .batch_requests = &batch_requests_.Add({{"table", table}}, PowersOfTwo(12)),
      .ids = &ids_.Add({{"table", table}}),
      .answer_bytes = &answer_bytes_.Add({{"table", table}}),
      .pooled_bags = &pooled_bags_.Add({{"table", table}}),
      .dropped_deadline = &dropped_requests_.Add({{"table", table}, {"reason", "deadline"}}),
      .dropped_cancelled = &dropped_requests_.Add({{"table", table}, {"reason", "cancelled"}}),
      .late_answers = &late_answers_.Add({{"table", table}}),
      .queue_ids = &queue_ids_.Add({{"table", table}}),
      .queue_limit_ids = &queue_limit_ids_.Add({{"table", table}}),
      .inflight_batches = &inflight_batches_.Add({{"table", table}}),
      .device_bytes = &table_device_bytes_.Add({{"table", table}}),
      .updated_rows = &updated_rows_.Add({{"table", table}}),
      .update_sequence = &update_sequence_.Add({{"table", table}}),
      .last_update_time = &last_update_time_.Add({{"table", table}}),
      .update_seconds = &update_seconds_.Add({{"table", table}}, s),
      .version = &table_version_.Add({{"table", table}}),
      .saves_ok = &table_saves_.Add({{"table", table}, {"result", "ok"}}),
      .saves_failed = &table_saves_.Add({{"table", table}, {"result", "failed"}}),
      .version_loads_ok = &version_loads_.Add({{"table", table}, {"result", "loaded"}}),
      .version_loads_refused = &version_loads_.Add({{"table", table}, {"result", "refused"}}),
  };
}

void Metrics::RejectIds(const std::string& table, absl::string_view reason, int64_t ids) {
  const prometheus::Labels labels = {{"table", table}, {"reason", std::string(reason)}};
  rejected_ids_.Add(labels).Increment(static_cast<double>(ids));
  rejected_requests_.Add(labels).Increment();
}

void Metrics::RecordFeatureCall(int64_t features, int64_t ids) {
  feature_call_features_.Observe(static_cast<double>(features));
  feature_call_ids_.Observe(static_cast<double>(ids));
}

void Metrics::FeatureFailed(const std::string& table, absl::StatusCode code) {
  feature_errors_
      .Add({{"table", table}, {"code", std::string(GrpcCodeName(static_cast<int>(code)))}})
      .Increment();
}

// The instances of one gRPC method, resolved on its first call; per code on the code's first use.
struct Metrics::MethodMetrics {
  prometheus::Counter* started = nullptr;
  prometheus::Histogram* handling = nullptr;
  bool is_embedding = false;  // also recorded as embedding_request_duration_seconds
  std::string service, method, type;
  std::atomic<prometheus::Counter*> handled[kNumCodes] = {};
  std::atomic<prometheus::Histogram*> duration[kNumCodes] = {};
};

Metrics::MethodMetrics& Metrics::ForMethod(absl::string_view full_method, absl::string_view type) {
  const absl::string_view key = full_method;
  {
    absl::ReaderMutexLock lock(&methods_mu_);
    if (auto it = methods_.find(key); it != methods_.end()) {
      return *it->second;
    }
  }
  absl::MutexLock lock(&methods_mu_);
  auto& slot = methods_[key];
  if (slot == nullptr) {
    slot = std::make_unique<MethodMetrics>();
    // "/embedding.v1.EmbeddingService/LookUp" -> service, method.
    std::pair<std::string, std::string> parts =
        absl::StrSplit(absl::StripPrefix(key, "/"), absl::MaxSplits('/', 1));
    slot->service = std::move(parts.first);
    slot->method = std::move(parts.second);
    slot->type = std::string(type);
    slot->is_embedding = slot->service == "embedding.v1.EmbeddingService";
    const prometheus::Labels labels = {
        {"grpc_service", slot->service}, {"grpc_method", slot->method}, {"grpc_type", slot->type}};
    slot->started = &grpc_started_.Add(labels);
    slot->handling = &grpc_handling_.Add(labels, SecondsBuckets());
  }
  return *slot;
}

void Metrics::CallStarted(MethodMetrics& m) { m.started->Increment(); }

void Metrics::RecordHandled(MethodMetrics& m, int code, double seconds) {
  if (code < 0 || code >= kNumCodes) {
    code = 2;  // UNKNOWN
  }
  prometheus::Counter* handled = m.handled[code].load(std::memory_order_acquire);
  if (handled == nullptr) {
    const std::string name(GrpcCodeName(code));
    handled = &grpc_handled_.Add({{"grpc_service", m.service},
                                  {"grpc_method", m.method},
                                  {"grpc_type", m.type},
                                  {"grpc_code", name}});
    m.handled[code].store(handled, std::memory_order_release);
    if (m.is_embedding) {
      m.duration[code].store(
          &request_duration_.Add({{"method", m.method}, {"code", name}}, SecondsBuckets()),
          std::memory_order_release);
    }
  }
  handled->Increment();
  m.handling->Observe(seconds);
  if (prometheus::Histogram* d = m.duration[code].load(std::memory_order_acquire)) {
    d->Observe(seconds);
  }
}

}  // namespace emb::service
