#include "service/rpc/admin_service.h"

#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "service/rpc/grpc_status.h"
#include "service/rpc/request_validation.h"

namespace emb::service {

using embedding::v1::UpdateRowsRequest;
using embedding::v1::UpdateRowsResponse;

// One UpdateRows stream. Its state lives under mu_, and the gRPC operations are started under it
// too: gRPC runs this reactor's reactions on its own threads (it is not inlineable), never inside
// the Start or Finish that causes them, so a reaction waits for mu_ instead of re-entering it.
// At most one of reading (request_ belongs to gRPC), applying (request_ belongs to the batcher)
// and writing (response_ belongs to gRPC) at a time, except that Finish may cut a read short.
class UpdateRowsCall final : public grpc::ServerBidiReactor<UpdateRowsRequest, UpdateRowsResponse> {
 public:
  UpdateRowsCall(AdminServiceImpl* service, Clock* clock) : service_(service), clock_(clock) {}

  // Reads the first message, or ends the call at once with `refusal`.
  void Start(const absl::Status& refusal) {
    absl::MutexLock lock(&mu_);
    if (!refusal.ok()) {
      FinishWhenIdle(refusal);
      return;
    }
    reading_ = true;
    StartRead(&request_);
  }

  // The server is shutting down: UNAVAILABLE once the message being applied, if any, is answered.
  void Close() {
    absl::MutexLock lock(&mu_);
    FinishWhenIdle(absl::UnavailableError(
        "the server is shutting down: every message answered is applied; resume from the "
        "table's sequence on another replica or after the restart"));
  }

  void OnReadDone(bool ok) override {
    absl::MutexLock lock(&mu_);
    reading_ = false;
    if (!ok) {
      FinishWhenIdle(absl::OkStatus());  // the client half-closed (or the call was cancelled)
      return;
    }
    if (finish_.has_value()) {
      MaybeFinish();  // closing: the message is neither applied nor answered
      return;
    }
    const absl::Time received = clock_->Now();
    absl::StatusOr<ServedTable*> table =
        FindServedTable(service_->tables_.load(std::memory_order_acquire), request_.table());
    if (!table.ok()) {
      FinishWhenIdle(table.status());
      return;
    }
    const TableInfo& info = (*table)->store->info();
    absl::StatusOr<DataType> rows_type = ValidateUpdateRowsRequest(
        request_, RequestTable{info.name, info.rows, info.dim, info.dtype});
    if (!rows_type.ok()) {
      FinishWhenIdle(rows_type.status());
      return;
    }
    // The slow part (conversion, the copy to the device) here, while batches run; the batch
    // boundary then only writes.
    absl::StatusOr<std::unique_ptr<PreparedRows>> prepared = (*table)->store->PrepareRows(
        absl::MakeConstSpan(request_.ids().data(), request_.ids_size()), *rows_type,
        absl::MakeConstSpan(reinterpret_cast<const std::byte*>(request_.rows().data()),
                            request_.rows().size()));
    if (!prepared.ok()) {
      FinishWhenIdle(prepared.status());
      return;
    }
    Batcher::Update update;
    update.rows = *std::move(prepared);
    update.sequence = request_.sequence();
    update.received = received;
    update.done = [this, name = info.name](absl::StatusOr<int64_t> written) {
      Applied(name, written);
    };
    applying_ = true;
    if (absl::Status s = (*table)->batcher->SubmitUpdate(std::move(update)); !s.ok()) {
      applying_ = false;
      FinishWhenIdle(s);
    }
  }

  void OnWriteDone(bool ok) override {
    absl::MutexLock lock(&mu_);
    writing_ = false;
    if (!ok) {
      FinishWhenIdle(absl::CancelledError("the client went away before reading the answer"));
    } else if (finish_.has_value()) {
      MaybeFinish();
    } else {
      reading_ = true;
      StartRead(&request_);
    }
  }

  void OnDone() override {
    service_->Forget(this);
    delete this;
  }

 private:
  // The batcher applied the message (`written` rows) or refused it.
  void Applied(const std::string& table, const absl::StatusOr<int64_t>& written) {
    absl::MutexLock lock(&mu_);
    applying_ = false;
    if (!written.ok()) {
      FinishWhenIdle(written.status());
      return;
    }
    response_.set_table(table);
    response_.set_sequence(request_.sequence());
    response_.set_rows(*written);
    writing_ = true;
    StartWrite(&response_);
  }

  // Ends the call with `s` (the first status given wins) once nothing is applied or written.
  void FinishWhenIdle(const absl::Status& s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!finish_.has_value()) {
      finish_ = s;
    }
    MaybeFinish();
  }
  void MaybeFinish() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (finish_.has_value() && !applying_ && !writing_ && !finished_) {
      finished_ = true;
      Finish(ToGrpcStatus(*finish_));
    }
  }

  AdminServiceImpl* const service_;
  Clock* const clock_;
  absl::Mutex mu_;
  bool reading_ ABSL_GUARDED_BY(mu_) = false;
  bool applying_ ABSL_GUARDED_BY(mu_) = false;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<absl::Status> finish_ ABSL_GUARDED_BY(mu_);
  UpdateRowsRequest request_;
  UpdateRowsResponse response_;
};

AdminServiceImpl::AdminServiceImpl(AdminOptions options, Clock* clock)
    : options_(std::move(options)),
      allowed_(options_.allowed_identities.begin(), options_.allowed_identities.end()),
      clock_(clock) {}

AdminServiceImpl::~AdminServiceImpl() {
  absl::MutexLock lock(&mu_);
  // gRPC calls OnDone for every call before the server it belongs to is destroyed.
  mu_.Await(absl::Condition(
      +[](absl::flat_hash_set<UpdateRowsCall*>* calls) { return calls->empty(); }, &calls_));
}

void AdminServiceImpl::SetTables(std::vector<ServedTable>* tables) {
  tables_.store(tables, std::memory_order_release);
}

void AdminServiceImpl::Shutdown() {
  absl::MutexLock lock(&mu_);
  shutting_down_ = true;
  for (UpdateRowsCall* call : calls_) {
    call->Close();  // under mu_: the call's OnDone waits in Forget, so `call` stays alive
  }
}

void AdminServiceImpl::Forget(UpdateRowsCall* call) {
  absl::MutexLock lock(&mu_);
  calls_.erase(call);
}

absl::Status AdminServiceImpl::CheckCaller(const grpc::CallbackServerContext& ctx) const {
  if (!options_.require_identity) {
    return absl::OkStatus();
  }
  const std::shared_ptr<const grpc::AuthContext> auth = ctx.auth_context();
  std::vector<std::string> identities;
  if (auth != nullptr) {
    for (const grpc::string_ref& id : auth->GetPeerIdentity()) {
      identities.emplace_back(id.data(), id.size());
    }
  }
  if (identities.empty()) {
    return absl::PermissionDeniedError(
        "the admin service takes only callers with a client certificate on its allow-list "
        "(--admin_allowed_identities); this call presented none");
  }
  for (const std::string& id : identities) {
    if (allowed_.contains(id)) {
      return absl::OkStatus();
    }
  }
  std::vector<std::string> shown;
  for (const std::string& id : identities) {
    shown.push_back(EchoText(id));
    if (shown.size() == 4) {
      break;
    }
  }
  return absl::PermissionDeniedError(
      absl::StrCat("client identity ", absl::StrJoin(shown, ", "),
                   " is not on the admin allow-list (--admin_allowed_identities)"));
}

grpc::ServerBidiReactor<UpdateRowsRequest, UpdateRowsResponse>* AdminServiceImpl::UpdateRows(
    grpc::CallbackServerContext* ctx) {
  auto* call = new UpdateRowsCall(this, clock_);  // deletes itself in OnDone
  absl::Status refusal = CheckCaller(*ctx);
  {
    absl::MutexLock lock(&mu_);
    calls_.insert(call);
    if (refusal.ok() && shutting_down_) {
      refusal = absl::UnavailableError("the server is shutting down");
    }
  }
  if (refusal.ok() && tables_.load(std::memory_order_acquire) == nullptr) {
    refusal = absl::UnavailableError("tables are still loading; retry shortly");
  }
  call->Start(refusal);
  return call;
}

}  // namespace emb::service
