#include "service/rpc/features_call.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/support/proto_buffer_reader.h"
#include "grpcpp/support/proto_buffer_writer.h"
#include "proto/convert/data_type_proto.h"
#include "service/rpc/grpc_status.h"
#include "service/rpc/lookup_answer.h"
#include "service/rpc/request_table.h"

namespace emb::service {
namespace {

using embedding::v1::LookUpFeaturesRequest;
using embedding::v1::LookUpFeaturesResponse;

// One LookUpFeatures from its handler to OnDone: the parsed request and its plan, one answer
// buffer per feature (its batcher writes the feature's rows there), the features not yet answered
// and the first failure, and the call's claim on the bound of unsent answers (held until gRPC
// has sent the answer: OnDone).
class FeaturesCall final : public grpc::ServerUnaryReactor {
 public:
  FeaturesCall(grpc::CallbackServerContext* ctx, grpc::ByteBuffer* response_bytes,
               std::vector<ServedTable>* tables, const FeaturesService& service)
      : ctx_(ctx), response_bytes_(response_bytes), tables_(tables), service_(service) {}

  void OnCancel() override {
    cancelled_.store(true, std::memory_order_relaxed);
    service_.unsent_answers->Wake();
  }
  void OnDone() override { delete this; }

  // Parses, checks and admits the call, then queues its features; or finishes it.
  void Start(const grpc::ByteBuffer& request_bytes);

 private:
  // Whether the request parsed and passed PlanFeatures (else the call is finished).
  bool Plan(const grpc::ByteBuffer& request_bytes);
  // Queues every feature on its table's batcher (the call admitted).
  void Submit();
  // Feature `i` is answered (`status` OK: its rows are in answers_[i]) or failed.
  void FeatureDone(size_t i, const absl::Status& status);
  // Every feature is answered: lays out the answer and finishes the call.
  void Complete();
  // The serialized answer from the features' rows (the unpooled ones' buffers taken over).
  grpc::ByteBuffer Answer();
  void Fail(const absl::Status& status) {
    claim_ = UnsentAnswers::Claim();
    Finish(ToGrpcStatus(status));
  }
  ServedTable& TableOf(size_t feature) { return (*tables_)[plan_.features[feature].table]; }

  grpc::CallbackServerContext* const ctx_;
  grpc::ByteBuffer* const response_bytes_;
  std::vector<ServedTable>* const tables_;
  const FeaturesService& service_;
  LookUpFeaturesRequest request_;
  FeaturesPlan plan_;
  absl::Time deadline_;
  std::vector<AnswerBuffer> answers_;  // one per feature
  std::atomic<size_t> pending_{0};     // features not yet answered
  absl::Mutex mu_;
  absl::Status failure_ ABSL_GUARDED_BY(mu_);  // the first feature's that failed
  UnsentAnswers::Claim claim_;
  std::atomic<bool> cancelled_{false};
};

bool FeaturesCall::Plan(const grpc::ByteBuffer& request_bytes) {
  grpc::ByteBuffer copy(request_bytes);  // shares the slices; the reader consumes a ByteBuffer
  grpc::ProtoBufferReader reader(&copy);
  if (!request_.ParseFromZeroCopyStream(&reader)) {
    Fail(absl::InvalidArgumentError("the request is not a LookUpFeaturesRequest"));
    return false;
  }
  std::vector<RequestTable> tables;
  tables.reserve(tables_->size());
  for (const ServedTable& t : *tables_) {
    tables.push_back(RequestTableOf(t.store->info()));
  }
  FeatureReject reject;
  absl::StatusOr<FeaturesPlan> plan = PlanFeatures(request_, tables, service_.limits, &reject);
  if (!plan.ok()) {
    if (!reject.reason.empty()) {
      service_.metrics->RejectIds(std::string(tables[reject.table].name), reject.reason,
                                  reject.ids);
    }
    Fail(plan.status());
    return false;
  }
  plan_ = *std::move(plan);
  service_.metrics->RecordFeatureCall(static_cast<int64_t>(plan_.features.size()), plan_.ids);
  return true;
}

void FeaturesCall::Start(const grpc::ByteBuffer& request_bytes) {
  deadline_ =
      std::min(absl::FromChrono(ctx_->deadline()), service_.clock->Now() + service_.max_call_time);
  if (!Plan(request_bytes)) {
    return;
  }
  answers_.resize(plan_.features.size());
  UnsentAnswers::Bound refused_by;
  auto admitted = [this](absl::StatusOr<UnsentAnswers::Claim> claim, UnsentAnswers::Bound) {
    if (!claim.ok()) {
      Fail(claim.status());
      return;
    }
    claim_ = *std::move(claim);
    Submit();
  };
  UnsentAnswers::Admission admission = service_.unsent_answers->Admit(
      ctx_->peer(), AnswerBufferPool::BlockBytes(std::max<size_t>(plan_.answer_bytes, 1)),
      deadline_, &cancelled_, std::move(admitted), &refused_by);
  if (!admission.status.ok()) {
    Fail(admission.status);
    return;
  }
  if (!admission.waiting) {
    claim_ = std::move(admission.claim);
    Submit();
  }
}

void FeaturesCall::Submit() {
  const size_t n = plan_.features.size();
  pending_.store(n, std::memory_order_relaxed);
  for (size_t i = 0; i < n; ++i) {
    const PlannedFeature& f = plan_.features[i];
    if (f.plan.answer_rows == 0 || (f.lookup.ids_size() == 0 && !f.plan.pooled)) {
      FeatureDone(i, absl::OkStatus());  // nothing to look up
      continue;
    }
    Batcher::Request r;
    r.ids = absl::MakeConstSpan(f.lookup.ids().data(), f.lookup.ids_size());
    r.out_type = plan_.out_type;
    r.pooled = f.plan.pooled;
    r.offsets = f.plan.offsets;
    r.weights = absl::MakeConstSpan(f.lookup.weights().data(), f.lookup.weights_size());
    r.mean = f.plan.mean;
    r.out = &answers_[i];
    r.deadline = deadline_;
    r.cancelled = &cancelled_;
    r.done = [this, i](const absl::Status& s) { FeatureDone(i, s); };
    ServedTable& table = TableOf(i);
    if (absl::Status s = table.batcher->Submit(std::move(r)); !s.ok()) {
      service_.metrics->RejectIds(
          table.store->info().name,
          s.code() == absl::StatusCode::kResourceExhausted ? kRejectQueueFull : kRejectUnavailable,
          f.lookup.ids_size());
      FeatureDone(i, s);
    }
  }
}

void FeaturesCall::FeatureDone(size_t i, const absl::Status& status) {
  if (!status.ok()) {
    service_.metrics->FeatureFailed(TableOf(i).store->info().name, status.code());
    absl::MutexLock lock(&mu_);
    if (failure_.ok()) {
      failure_ = absl::Status(
          status.code(),
          absl::StrCat(FeatureText(static_cast<int>(i), request_.features(static_cast<int>(i)),
                                   TableOf(i).store->info().name),
                       ": ", status.message()));
    }
  }
  if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    Complete();
  }
}

void FeaturesCall::Complete() {
  absl::Status failure;
  {
    absl::MutexLock lock(&mu_);
    failure = failure_;
  }
  if (!failure.ok()) {
    answers_.clear();
    Fail(failure);
    return;
  }
  *response_bytes_ = Answer();
  answers_.clear();          // back to their pools
  Finish(grpc::Status::OK);  // last: OnDone may run inside it and delete this
}

grpc::ByteBuffer FeaturesCall::Answer() {
  // Written by hand around the rows, so that protobuf copies none of them: the pooled rows once
  // laid out, each unpooled feature's rows from its own buffer. Fields: 1, 2, 4 (the scalars), 3
  // (pooled), then 5 (each feature: its scalars, then 5, its rows). Parsers take any order.
  const size_t element = ElementSize(plan_.out_type);
  const size_t pooled_row = static_cast<size_t>(plan_.pooled_width) * element;
  auto* pooled = new std::string(pooled_row * static_cast<size_t>(plan_.batch_size), '\0');
  LookUpFeaturesResponse scalars;
  scalars.set_dtype(ToProto(plan_.out_type));
  scalars.set_batch_size(plan_.batch_size);
  scalars.set_pooled_width(plan_.pooled_width);
  std::string head = scalars.SerializeAsString();
  std::vector<grpc::Slice> slices;
  if (!pooled->empty()) {
    head.push_back(static_cast<char>((3 << 3) | 2));
    AppendVarint(pooled->size(), &head);
  }
  slices.emplace_back(head);
  if (!pooled->empty()) {
    char* bytes = pooled->data();
    const size_t size = pooled->size();
    slices.emplace_back(
        bytes, size, [](void* p) { delete static_cast<std::string*>(p); }, pooled);
  } else {
    delete pooled;
    pooled = nullptr;
  }
  for (size_t i = 0; i < plan_.features.size(); ++i) {
    const PlannedFeature& f = plan_.features[i];
    embedding::v1::FeatureAnswer a;
    a.set_name(request_.features(static_cast<int>(i)).name());
    a.set_dim(f.dim);
    a.set_pooled(f.plan.pooled);
    a.set_pooled_column(f.plan.pooled ? f.pooled_column : 0);
    std::string feature = a.SerializeAsString();
    const size_t rows = f.plan.pooled ? 0 : answers_[i].size();
    std::string rows_head;
    if (rows > 0) {
      rows_head.push_back(static_cast<char>((5 << 3) | 2));
      AppendVarint(rows, &rows_head);
    }
    std::string wrapped(1, static_cast<char>((5 << 3) | 2));
    AppendVarint(feature.size() + rows_head.size() + rows, &wrapped);
    wrapped.append(feature).append(rows_head);
    slices.emplace_back(wrapped);
    if (rows > 0) {
      slices.push_back(RowsSlice(std::move(answers_[i])));
    } else if (f.plan.pooled && pooled != nullptr) {
      // Sample s's vector goes to its row of the pooled answer, at the feature's column.
      const std::byte* from = answers_[i].data();
      char* to = pooled->data() + static_cast<size_t>(f.pooled_column) * element;
      const size_t row = static_cast<size_t>(f.dim) * element;
      for (int64_t s = 0; s < plan_.batch_size; ++s) {
        std::memcpy(to, from, row);
        from += row;
        to += pooled_row;
      }
    }
  }
  return grpc::ByteBuffer(slices.data(), slices.size());
}

}  // namespace

grpc::ServerUnaryReactor* StartLookUpFeatures(grpc::CallbackServerContext* ctx,
                                              const grpc::ByteBuffer& request_bytes,
                                              grpc::ByteBuffer* response_bytes,
                                              std::vector<ServedTable>* tables,
                                              const FeaturesService& service) {
  auto* call = new FeaturesCall(ctx, response_bytes, tables, service);  // deleted in OnDone
  call->Start(request_bytes);
  return call;
}

}  // namespace emb::service
