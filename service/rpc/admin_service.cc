#include "service/rpc/admin_service.h"

#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "service/common/log.h"
#include "service/rpc/grpc_status.h"
#include "service/rpc/request_table.h"
#include "service/rpc/request_validation.h"
#include "service/rpc/version_loader.h"
#include "service/tables/table_versions.h"
#include "service/write/table_writer.h"

namespace emb::service {
namespace {

// Finishes a unary call with `s`; the reactor, for the handler to return.
grpc::ServerUnaryReactor* FinishUnary(grpc::ServerUnaryReactor* reactor, const absl::Status& s) {
  reactor->Finish(ToGrpcStatus(s));
  return reactor;
}

}  // namespace

using embedding::v1::LoadVersionRequest;
using embedding::v1::LoadVersionResponse;
using embedding::v1::SaveTableRequest;
using embedding::v1::SaveTableResponse;
using embedding::v1::UpdateRowsRequest;
using embedding::v1::UpdateRowsResponse;

// One UpdateRows stream. Its state lives under mu_, and the gRPC operations are started under it
// too: gRPC runs this reactor's reactions on its own threads (it is not inlineable), never inside
// the Start or Finish that causes them, so a reaction waits for mu_ instead of re-entering it.
// At most one of reading (request_ belongs to gRPC), applying (request_ belongs to the writer)
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
    absl::StatusOr<DataType> rows_type = ValidateUpdateRowsRequest(request_, RequestTableOf(info));
    if (!rows_type.ok()) {
      FinishWhenIdle(rows_type.status());
      return;
    }
    // The table's writer prepares the rows (conversion, the copy to the device) on its own
    // thread, while batches run, and writes them between batches. request_ stays as it is until
    // Applied: no read is started while a message applies.
    applying_ = true;
    TableWriter::Update update;
    update.ids = absl::MakeConstSpan(request_.ids().data(), request_.ids_size());
    update.rows_type = *rows_type;
    update.rows = absl::MakeConstSpan(reinterpret_cast<const std::byte*>(request_.rows().data()),
                                      request_.rows().size());
    update.sequence = request_.sequence();
    update.received = received;
    update.done = [this, name = info.name](const absl::StatusOr<int64_t>& written) {
      Applied(name, written);
    };
    if (absl::Status s = (*table)->writer->Submit(std::move(update)); !s.ok()) {
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
    // gRPC calls OnDone on any of its threads once Finish has completed; the hand-off between the
    // thread that called Finish (under mu_) and this one is inside gRPC. Taking mu_ once orders
    // every earlier write to this call before its destruction, also for ThreadSanitizer.
    { absl::MutexLock lock(&mu_); }
    service_->Forget(this);
    delete this;
  }

 private:
  // The writer applied the message (`written` rows), or refused it.
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
  Shutdown();
  absl::MutexLock lock(&mu_);
  // gRPC calls OnDone for every call before the server it belongs to is destroyed.
  mu_.Await(absl::Condition(
      +[](absl::flat_hash_set<UpdateRowsCall*>* calls) { return calls->empty(); }, &calls_));
}

void AdminServiceImpl::SetTables(std::vector<ServedTable>* tables) {
  tables_.store(tables, std::memory_order_release);
}

void AdminServiceImpl::Shutdown() {
  bool first;  // the tables are only sure to be alive at the first call (the server's)
  {
    absl::MutexLock lock(&mu_);
    first = !shutting_down_;
    shutting_down_ = true;
    for (UpdateRowsCall* call : calls_) {
      call->Close();  // under mu_: the call's OnDone waits in Forget, so `call` stays alive
    }
  }
  // Not under mu_: a job ends by taking it. The save or load in progress finishes (and answers)
  // before the admin port closes; those queued behind it are answered UNAVAILABLE. Likewise the
  // update messages each table's writer has taken are written (the batchers still run), and
  // those waiting are not.
  worker_.Shutdown();
  if (std::vector<ServedTable>* tables = tables_.load(std::memory_order_acquire);
      first && tables != nullptr) {
    for (ServedTable& table : *tables) {
      table.writer->Shutdown();
    }
  }
}

void AdminServiceImpl::Forget(UpdateRowsCall* call) {
  absl::MutexLock lock(&mu_);
  calls_.erase(call);
}

absl::Status CheckAdminIdentity(const grpc::AuthContext* auth,
                                const absl::flat_hash_set<std::string>& allowed) {
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
    if (allowed.contains(id)) {
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

AdminAllowListProcessor::AdminAllowListProcessor(const std::vector<std::string>& allowed_identities)
    : allowed_(allowed_identities.begin(), allowed_identities.end()) {}

grpc::Status AdminAllowListProcessor::Process(const InputMetadata& /*auth_metadata*/,
                                              grpc::AuthContext* context,
                                              OutputMetadata* /*consumed_auth_metadata*/,
                                              OutputMetadata* /*response_metadata*/) {
  return ToGrpcStatus(CheckAdminIdentity(context, allowed_));
}

absl::Status AdminServiceImpl::CheckCaller(const grpc::CallbackServerContext& ctx) const {
  if (!options_.require_identity) {
    return absl::OkStatus();
  }
  return CheckAdminIdentity(ctx.auth_context().get(), allowed_);
}

absl::StatusOr<ServedTable*> AdminServiceImpl::CallersTable(const grpc::CallbackServerContext& ctx,
                                                            const std::string& table) const {
  if (absl::Status s = CheckCaller(ctx); !s.ok()) {
    return s;
  }
  return FindServedTable(tables_.load(std::memory_order_acquire), table);
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

grpc::ServerUnaryReactor* AdminServiceImpl::SaveTable(grpc::CallbackServerContext* ctx,
                                                      const SaveTableRequest* request,
                                                      SaveTableResponse* response) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  const auto refuse = [reactor](const absl::Status& s) { return FinishUnary(reactor, s); };
  absl::StatusOr<ServedTable*> table = CallersTable(*ctx, request->table());
  if (!table.ok()) {
    return refuse(table.status());
  }
  ServedTable& t = **table;
  const std::string& name = t.store->info().name;
  if (t.versions == nullptr) {
    return refuse(absl::FailedPreconditionError(absl::StrCat(
        "table '", EchoText(name),
        "' was not loaded from a version directory, so it has none to save into: serve it as "
        "--table=NAME=DIR with the file in DIR/1/")));
  }
  if (const std::optional<ShardSpec>& shard = t.store->info().shard; shard.has_value()) {
    // A version's file holds the whole table (each shard reads its rows of it), and this server
    // holds only its own rows.
    return refuse(absl::FailedPreconditionError(absl::StrCat(
        "table '", EchoText(name), "' is shard ", shard->index, "/", shard->count,
        " here, and a version holds the whole table: save it from a server that holds all of it, "
        "then load that version on every shard (LoadVersion)")));
  }
  absl::MutexLock lock(&mu_);
  if (shutting_down_) {
    return refuse(absl::UnavailableError("the server is shutting down"));
  }
  if (!saving_.insert(&t).second) {
    return refuse(
        absl::AbortedError(absl::StrCat("a save of table '", EchoText(name),
                                        "' is already queued or running; retry when it ends")));
  }
  absl::Status queued = worker_.Post([this, &t, reactor, response](const absl::Status& start) {
    absl::Status s = start;
    if (s.ok()) {
      // A version load by the poller may hold the table.
      if (t.versions->busy.exchange(true)) {
        s = absl::AbortedError(absl::StrCat("a version load of table '",
                                            EchoText(t.store->info().name),
                                            "' is running; retry when it ends"));
      } else {
        s = Save(t, response);
        t.versions->busy.store(false);
      }
    }
    {
      absl::MutexLock lock(&mu_);
      saving_.erase(&t);
    }
    reactor->Finish(ToGrpcStatus(s));
  });
  if (!queued.ok()) {
    saving_.erase(&t);
    return refuse(queued);
  }
  return reactor;
}

absl::Status AdminServiceImpl::Save(ServedTable& table, SaveTableResponse* response) {
  const TableInfo& info = table.store->info();
  const absl::Time start = clock_->Now();
  absl::StatusOr<VersionFile> file;
  int64_t saved_sequence = 0;
  absl::Status s = table.writer->WithUpdatesPaused([&](int64_t sequence) {
    saved_sequence = sequence;
    LogInfo("saving table '", info.name, "' (sequence ", sequence, ", ", info.bytes(),
            " bytes) as the next version in ", table.versions->dir, "; its updates wait");
    file = WriteVersion(table.versions->dir, table.versions->tensor, info.rows, info.dim,
                        info.dtype, sequence, [&](size_t offset, absl::Span<std::byte> out) {
                          return table.store->ReadRows(offset, out);
                        });
    return file.status();
  });
  if (!s.ok()) {
    table.metrics.saves_failed->Increment();
    LogError("saving table '", info.name, "' failed: ", s.message());
    return s;
  }
  table.versions->version.store(file->version, std::memory_order_release);
  table.metrics.version->Set(static_cast<double>(file->version));
  table.metrics.saves_ok->Increment();
  LogInfo(absl::StrFormat("table '%s' saved as version %d (sequence %d): %s, %d bytes, %.3f s",
                          info.name, file->version, saved_sequence, file->path, file->bytes,
                          SecondsSince(clock_, start)));
  response->set_table(info.name);
  response->set_version(file->version);
  response->set_sequence(saved_sequence);
  response->set_path(file->path);
  response->set_bytes(static_cast<int64_t>(file->bytes));
  return absl::OkStatus();
}

grpc::ServerUnaryReactor* AdminServiceImpl::LoadVersion(grpc::CallbackServerContext* ctx,
                                                        const LoadVersionRequest* request,
                                                        LoadVersionResponse* response) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  const auto refuse = [reactor](const absl::Status& s) { return FinishUnary(reactor, s); };
  absl::StatusOr<ServedTable*> table = CallersTable(*ctx, request->table());
  if (!table.ok()) {
    return refuse(table.status());
  }
  if (request->version() < 0) {
    return refuse(absl::InvalidArgumentError(
        absl::StrCat("version ", request->version(), " is negative (0: the newest)")));
  }
  absl::MutexLock lock(&mu_);
  if (shutting_down_) {
    return refuse(absl::UnavailableError("the server is shutting down"));
  }
  absl::Status queued = worker_.Post([this, &t = **table, reactor, response,
                                      version = request->version()](const absl::Status& start) {
    if (!start.ok()) {
      reactor->Finish(ToGrpcStatus(start));
      return;
    }
    absl::StatusOr<LoadedVersion> loaded = LoadTableVersion(t, version, version != 0, clock_);
    if (loaded.ok()) {
      response->set_table(t.store->info().name);
      response->set_version(loaded->version);
      response->set_sequence(loaded->sequence);
      response->set_pinned(version != 0);
    }
    reactor->Finish(ToGrpcStatus(loaded.status()));
  });
  if (!queued.ok()) {
    return refuse(queued);
  }
  return reactor;
}

}  // namespace emb::service
