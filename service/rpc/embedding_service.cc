#include "service/rpc/embedding_service.h"

#include <algorithm>
#include <atomic>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "grpcpp/support/proto_buffer_reader.h"
#include "proto/convert/data_type_proto.h"
#include "service/rpc/features_call.h"
#include "service/rpc/grpc_status.h"
#include "service/rpc/lookup_answer.h"
#include "service/rpc/request_table.h"
#include "service/rpc/request_validation.h"

namespace emb::service {
namespace {

using embedding::v1::ListTablesRequest;
using embedding::v1::ListTablesResponse;
using embedding::v1::LookUpRequest;

absl::string_view RejectReason(UnsentAnswers::Bound bound) {
  switch (bound) {
    case UnsentAnswers::Bound::kConnection:
      return kRejectUnsentConnection;
    case UnsentAnswers::Bound::kDeadline:
      return kRejectWouldBeLate;
    case UnsentAnswers::Bound::kTotal:
    case UnsentAnswers::Bound::kNone:
      break;
  }
  return kRejectUnsentTotal;
}

absl::Status ShuttingDown() {
  return absl::UnavailableError("the server is shutting down; retry on another replica");
}

grpc::ServerUnaryReactor* FinishNow(grpc::CallbackServerContext* ctx, const absl::Status& s) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  reactor->Finish(ToGrpcStatus(s));
  return reactor;
}

// One LookUp from its handler to OnDone: its reactor, the parsed request (the batcher reads its
// ids), the buffer the batcher writes the rows into, and the call's claim on the bound of
// unsent answers (which goes with the rows to gRPC, or is given back when the call fails).
class LookUpCall final : public grpc::ServerUnaryReactor {
 public:
  LookUpCall(grpc::CallbackServerContext* ctx, Clock* clock, UnsentAnswers* unsent)
      : ctx_(ctx), clock_(clock), unsent_(unsent) {}

  // gRPC runs it once the call is cancelled (the client reset the stream or went away, or the
  // deadline passed), after the handler has returned, on a gRPC thread; the batcher reads the
  // flag when the call's batch forms, and the admission of unsent answers where the call waits
  // for room.
  void OnCancel() override {
    cancelled.store(true, std::memory_order_relaxed);
    unsent_->Wake();
  }
  void OnDone() override {
    // An answer gRPC did not finish sending before the client's deadline cancelled the call.
    if (late_answers != nullptr && ctx_->IsCancelled() &&
        clock_->Now() >= absl::FromChrono(ctx_->deadline())) {
      late_answers->Increment();
    }
    delete this;
  }
  // Both reactions are trivial (a store, a delete, a wake-up), so gRPC may run them on the thread
  // that completes the call, as it does its default reactor's, instead of hopping to its executor.
  bool InternalInlineable() override { return true; }

  // Finishes the call with `s` (not OK), giving its claim back.
  void Fail(const absl::Status& s) {
    claim = UnsentAnswers::Claim();  // nothing to hold for a failed call
    Finish(ToGrpcStatus(s));
  }

  LookUpRequest request;
  LookUpPlan plan;  // the answer's type and shape, and the bags of a pooled call
  ServedTable* table = nullptr;
  grpc::ByteBuffer* response = nullptr;
  absl::Time deadline;  // the server's: the client's, at most max_call_time from arrival
  AnswerBuffer rows;
  UnsentAnswers::Claim claim;
  std::atomic<bool> cancelled{false};
  // Set when the call is finished OK with rows: counted if the answer then arrives too late.
  prometheus::Counter* late_answers = nullptr;

 private:
  grpc::CallbackServerContext* const ctx_;
  Clock* const clock_;
  UnsentAnswers* const unsent_;
};

// Queues an admitted call (its claim taken) for its table's batcher.
void SubmitToBatcher(LookUpCall* call, Metrics* metrics) {
  const LookUpRequest& request = call->request;
  const LookUpPlan& plan = call->plan;
  Batcher::Request r;
  r.ids = absl::MakeConstSpan(request.ids().data(), request.ids_size());
  r.out_type = plan.out_type;
  r.pooled = plan.pooled;
  r.offsets = plan.offsets;
  r.weights = absl::MakeConstSpan(request.weights().data(), request.weights_size());
  r.mean = plan.mean;
  r.out = &call->rows;
  r.deadline = call->deadline;
  r.cancelled = &call->cancelled;
  r.done = [call, late = call->table->metrics.late_answers](const absl::Status& s) {
    if (!s.ok()) {
      call->claim = UnsentAnswers::Claim();
    } else {
      call->late_answers = late;
      // The rows and their claim go to gRPC, which gives both back once it has sent them.
      *call->response = SerializeLookUpAnswer(std::move(call->rows), call->plan.shape,
                                              call->plan.out_type, std::move(call->claim));
    }
    call->Finish(ToGrpcStatus(s));  // last: OnDone may run inside it and delete `call`
  };
  const int num_ids = request.ids_size();
  const std::string& name = call->table->store->info().name;
  if (absl::Status s = call->table->batcher->Submit(std::move(r)); !s.ok()) {
    metrics->RejectIds(
        name,
        s.code() == absl::StatusCode::kResourceExhausted ? kRejectQueueFull : kRejectUnavailable,
        num_ids);
    call->Fail(s);
  }
}

// A LookUp that carries no whole message. gRPC 1.51 hands the handler a call that its client
// reset before the message was read all the same, with no message, and reports the
// cancellation only after the handler has returned. So this call's answer waits for its initial
// metadata to be sent: that fails for a cancelled call (answered CANCELLED: counted as cancelled,
// not as a bad request) and succeeds where the client half-closed without a message
// (INVALID_ARGUMENT).
class NoMessageCall final : public grpc::ServerUnaryReactor {
 public:
  explicit NoMessageCall(absl::string_view message) : message_(message) {
    StartSendInitialMetadata();
  }
  void OnSendInitialMetadataDone(bool ok) override {
    Finish(ok ? ToGrpcStatus(absl::InvalidArgumentError(
                    absl::StrCat("the call carried no whole ", message_,
                                 " message (none was sent, or the stream ended inside it)")))
              : grpc::Status(grpc::StatusCode::CANCELLED, "the call was cancelled"));
  }
  void OnCancel() override {}
  void OnDone() override { delete this; }

 private:
  const absl::string_view message_;
};

}  // namespace

EmbeddingServiceImpl::EmbeddingServiceImpl(ServiceLimits limits, Metrics* metrics, Clock* clock)
    : limits_(limits),
      metrics_(metrics),
      clock_(clock),
      unsent_answers_(
          UnsentAnswers::Bounds{
              .total = static_cast<size_t>(limits.max_unsent_answer_bytes),
              .per_connection = static_cast<size_t>(limits.max_unsent_answer_bytes_per_connection),
              .deadline_fraction = limits.deadline_admission_fraction,
              .socket_bytes = static_cast<size_t>(limits.deadline_admission_socket_bytes),
              .waiting_per_connection = limits.max_waiting_calls_per_connection},
          &metrics->unsent_answer_bytes(), clock, &metrics->unsent_answer_waiting_calls()),
      features_(std::make_unique<FeaturesService>(
          FeaturesService{.limits = FeatureLimits{.max_features = limits.max_features_per_call,
                                                  .max_call_ids = limits.max_feature_call_ids,
                                                  .max_feature_ids = limits.max_request_ids,
                                                  .max_response_bytes = limits.max_response_bytes},
                          .max_call_time = limits.max_call_time,
                          .metrics = metrics,
                          .clock = clock,
                          .unsent_answers = &unsent_answers_})) {}

EmbeddingServiceImpl::~EmbeddingServiceImpl() = default;

void EmbeddingServiceImpl::SetTables(std::vector<ServedTable>* tables) {
  tables_.store(tables, std::memory_order_release);
}

void EmbeddingServiceImpl::HoldNewCalls() {
  absl::MutexLock lock(&mu_);
  gate_.store(Gate::kHold, std::memory_order_release);
}

void EmbeddingServiceImpl::RefuseCalls() {
  std::vector<grpc::ServerUnaryReactor*> held;
  {
    absl::MutexLock lock(&mu_);
    gate_.store(Gate::kRefuse, std::memory_order_release);
    held.swap(held_);
  }
  for (grpc::ServerUnaryReactor* reactor : held) {
    reactor->Finish(ToGrpcStatus(ShuttingDown()));
  }
}

int64_t EmbeddingServiceImpl::held_calls() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(held_.size());
}

grpc::ServerUnaryReactor* EmbeddingServiceImpl::HoldOrRefuse(grpc::CallbackServerContext* ctx) {
  if (gate_.load(std::memory_order_acquire) == Gate::kOpen) {
    return nullptr;  // the common case, one load
  }
  absl::MutexLock lock(&mu_);
  switch (gate_.load(std::memory_order_relaxed)) {
    case Gate::kOpen:
      return nullptr;
    case Gate::kHold:
      held_.push_back(ctx->DefaultReactor());
      return held_.back();
    case Gate::kRefuse:
      break;
  }
  return FinishNow(ctx, ShuttingDown());
}

absl::StatusOr<ServedTable*> FindServedTable(std::vector<ServedTable>* tables,
                                             const std::string& name) {
  if (tables == nullptr) {
    return absl::UnavailableError("tables are still loading; retry shortly");
  }
  if (name.empty()) {
    return &tables->front();
  }
  for (ServedTable& t : *tables) {
    if (t.store->info().name == name) {
      return &t;
    }
  }
  std::vector<std::string> names;
  for (const ServedTable& t : *tables) {
    names.push_back(t.store->info().name);
  }
  return absl::NotFoundError(absl::StrCat("unknown table '", EchoText(name),
                                          "'; this server has: ", absl::StrJoin(names, ", ")));
}

absl::Status EmbeddingServiceImpl::Validate(const LookUpRequest& request, const ServedTable& table,
                                            LookUpPlan* plan) const {
  const EmbeddingStore& store = *table.store;
  absl::string_view reason;
  absl::StatusOr<LookUpPlan> planned =
      PlanLookUp(request, RequestTableOf(store.info()), limits_.max_request_ids,
                 limits_.max_response_bytes, &reason);
  if (!planned.ok()) {
    metrics_->RejectIds(store.info().name, reason, request.ids_size());
    return planned.status();
  }
  *plan = *std::move(planned);
  return absl::OkStatus();
}

grpc::ServerUnaryReactor* EmbeddingServiceImpl::LookUp(grpc::CallbackServerContext* ctx,
                                                       const grpc::ByteBuffer* request_bytes,
                                                       grpc::ByteBuffer* response_bytes) {
  if (grpc::ServerUnaryReactor* reactor = HoldOrRefuse(ctx)) {
    return reactor;
  }
  if (!request_bytes->Valid()) {
    // gRPC hands a raw method no buffer when the client half-closed without a whole message
    // (none sent, or a length prefix the stream ended short of), or reset the stream first.
    return new NoMessageCall("LookUpRequest");
  }
  auto* call = new LookUpCall(ctx, clock_, &unsent_answers_);  // deletes itself in OnDone
  // The call's deadline in the server: its client's, at most max_call_time from now.
  call->deadline =
      std::min(absl::FromChrono(ctx->deadline()), clock_->Now() + limits_.max_call_time);
  call->response = response_bytes;
  auto finish = [call](const absl::Status& s) {
    if (s.ok()) {
      call->Finish(grpc::Status::OK);
    } else {
      call->Fail(s);
    }
    return call;
  };
  grpc::ByteBuffer copy(*request_bytes);  // shares the slices; the reader consumes a ByteBuffer
  grpc::ProtoBufferReader reader(&copy);
  if (!call->request.ParseFromZeroCopyStream(&reader)) {
    return finish(absl::InvalidArgumentError("the request is not a LookUpRequest"));
  }
  const LookUpRequest& request = call->request;
  absl::StatusOr<ServedTable*> table =
      FindServedTable(tables_.load(std::memory_order_acquire), request.table());
  if (!table.ok()) {
    return finish(table.status());
  }
  call->table = *table;
  if (absl::Status s = Validate(request, **table, &call->plan); !s.ok()) {
    return finish(s);
  }
  const LookUpPlan& plan = call->plan;
  const EmbeddingStore& store = *(*table)->store;
  if (plan.answer_rows == 0 || (request.ids_size() == 0 && !plan.pooled)) {
    *response_bytes = SerializeLookUpAnswer(AnswerBuffer(), plan.shape, plan.out_type);
    return finish(absl::OkStatus());
  }
  const int num_ids = request.ids_size();
  // Validate bounded the answer by max_response_bytes, so this does not overflow.
  const size_t answer_bytes = static_cast<size_t>(plan.answer_rows) *
                              static_cast<size_t>(store.info().dim) * ElementSize(plan.out_type);
  UnsentAnswers::Bound refused_by;
  // A call that must wait for room is admitted later, on the admission thread, where it then
  // goes on as one admitted at once.
  auto admitted = [call, metrics = metrics_, num_ids](absl::StatusOr<UnsentAnswers::Claim> claim,
                                                      UnsentAnswers::Bound waited_for) {
    if (!claim.ok()) {
      // A call cancelled while it waited was not turned away; one past its deadline was, by the
      // bound it waited on.
      if (claim.status().code() != absl::StatusCode::kCancelled) {
        metrics->RejectIds(call->table->store->info().name,
                           claim.status().code() == absl::StatusCode::kUnavailable
                               ? kRejectUnavailable
                               : RejectReason(waited_for),
                           num_ids);
      }
      call->Fail(claim.status());
      return;
    }
    call->claim = *std::move(claim);
    SubmitToBatcher(call, metrics);
  };
  UnsentAnswers::Admission admission =
      unsent_answers_.Admit(ctx->peer(), AnswerBufferPool::BlockBytes(answer_bytes), call->deadline,
                            &call->cancelled, std::move(admitted), &refused_by);
  if (!admission.status.ok()) {
    metrics_->RejectIds(store.info().name, RejectReason(refused_by), num_ids);
    return finish(admission.status);
  }
  if (!admission.waiting) {
    call->claim = std::move(admission.claim);
    SubmitToBatcher(call, metrics_);
  }
  return call;
}

grpc::ServerUnaryReactor* EmbeddingServiceImpl::LookUpFeatures(
    grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* request_bytes,
    grpc::ByteBuffer* response_bytes) {
  if (grpc::ServerUnaryReactor* reactor = HoldOrRefuse(ctx)) {
    return reactor;
  }
  if (!request_bytes->Valid()) {
    return new NoMessageCall("LookUpFeaturesRequest");
  }
  std::vector<ServedTable>* tables = tables_.load(std::memory_order_acquire);
  if (tables == nullptr) {
    return FinishNow(ctx, absl::UnavailableError("tables are still loading; retry shortly"));
  }
  return StartLookUpFeatures(ctx, *request_bytes, response_bytes, tables, *features_);
}

grpc::ServerUnaryReactor* EmbeddingServiceImpl::ListTables(grpc::CallbackServerContext* ctx,
                                                           const ListTablesRequest* /*request*/,
                                                           ListTablesResponse* response) {
  if (grpc::ServerUnaryReactor* reactor = HoldOrRefuse(ctx)) {
    return reactor;
  }
  std::vector<ServedTable>* tables = tables_.load(std::memory_order_acquire);
  if (tables == nullptr) {
    return FinishNow(ctx, absl::UnavailableError("tables are still loading; retry shortly"));
  }
  for (size_t i = 0; i < tables->size(); ++i) {
    const TableInfo& table = (*tables)[i].store->info();
    embedding::v1::TableInfo* info = response->add_tables();
    info->set_name(table.name);
    info->set_rows(table.rows);
    info->set_dim(table.dim);
    info->set_dtype(ToProto(table.dtype));
    info->set_device(table.device);
    info->set_bytes(static_cast<int64_t>(table.bytes()));
    info->set_host_tier(table.host_tier);
    info->set_cache_rows(table.cache_rows);
    info->set_device_bytes(static_cast<int64_t>(table.device_bytes));
    if (table.shard.has_value()) {
      info->set_shard_index(table.shard->index);
      info->set_shard_count(table.shard->count);
    }
    info->set_first_row(table.ids.first());
    info->set_whole_rows(table.ids.whole());
    switch (table.placement) {
      case Placement::kOneDevice:
        break;
      case Placement::kReplicated:
        info->set_placement(embedding::v1::PLACEMENT_REPLICAS);
        break;
      case Placement::kRowSharded:
        info->set_placement(embedding::v1::PLACEMENT_ROWS);
        break;
    }
    for (const DevicePart& part : table.parts) {
      embedding::v1::DevicePart* p = info->add_parts();
      p->set_device(part.device);
      p->set_first_row(part.ids.first());
      p->set_rows(part.ids.count());
      p->set_device_bytes(static_cast<int64_t>(part.device_bytes));
      p->set_host_tier(part.host_tier);
    }
    info->set_is_default(i == 0);
    info->set_sequence((*tables)[i].writer->last_sequence());
    info->set_updated_rows((*tables)[i].writer->updated_rows());
    if ((*tables)[i].versions != nullptr) {
      info->set_version((*tables)[i].versions->version.load(std::memory_order_acquire));
      info->set_version_pinned((*tables)[i].versions->pinned.load(std::memory_order_acquire));
    }
  }
  return FinishNow(ctx, absl::OkStatus());
}

}  // namespace emb::service
