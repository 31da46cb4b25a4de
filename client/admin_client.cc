#include "client/admin_client.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "client/call_deadline.h"
#include "proto/convert/data_type_proto.h"

namespace emb::client {
namespace {

namespace pb = ::embedding::v1;

// FromGrpcStatus, saying what UNIMPLEMENTED means here: gRPC answers a call of a service the
// server does not have with UNIMPLEMENTED and no text.
absl::Status FromAdminStatus(const grpc::Status& status) {
  if (status.error_code() != grpc::StatusCode::UNIMPLEMENTED) {
    return FromGrpcStatus(status);
  }
  return absl::UnimplementedError(absl::StrCat(
      kNoAdminService, status.error_message().empty()
                           ? ""
                           : absl::StrCat(" (it said: ", status.error_message(), ")")));
}

}  // namespace

std::string EncodeRows(absl::Span<const float> values, DataType dtype) {
  std::string out(values.size() * ElementSize(dtype), '\0');
  for (size_t i = 0; i < values.size(); ++i) {
    StoreFromFloat(out.data(), dtype, static_cast<int64_t>(i), values[i]);  // little-endian host
  }
  return out;
}

void ToUpdateRowsRequest(const RowUpdate& update, pb::UpdateRowsRequest* out) {
  out->Clear();
  out->set_table(update.table);
  out->mutable_ids()->Add(update.ids.begin(), update.ids.end());
  out->set_rows(update.rows);
  out->set_dtype(ToProto(update.dtype));
  out->set_sequence(update.sequence);
}

RowWriter::RowWriter(pb::EmbeddingAdminService::Stub* stub, absl::Duration timeout,
                     int64_t max_unacked)
    : max_unacked_(max_unacked) {
  SetDeadline(timeout, &ctx_);
  stub->async()->UpdateRows(&ctx_, this);
  AddHold();  // Send and Finish start writes from outside the reactions
  StartRead(&response_);
  StartCall();
}

RowWriter::~RowWriter() {
  bool cancel;
  {
    absl::MutexLock lock(&mu_);
    finished_ = true;
    ended_ = true;  // nothing more will be started
    cancel = !writes_done_ && !status_.has_value();
  }
  if (cancel) {
    ctx_.TryCancel();
  }
  MaybeReleaseHold();
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](std::optional<absl::Status>* s) { return s->has_value(); }, &status_));
}

absl::Status RowWriter::Send(const RowUpdate& update) {
  pb::UpdateRowsRequest request;
  ToUpdateRowsRequest(update, &request);
  {
    absl::MutexLock lock(&mu_);
    if (finished_) {
      return absl::FailedPreconditionError("Send after Finish");
    }
    auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return ended_ || (!writing_ && static_cast<int64_t>(in_flight_.size()) < max_unacked_);
    };
    mu_.Await(absl::Condition(&ready));
    if (ended_) {
      // The stream is over (a message was refused, the deadline passed, ...): its status,
      // once gRPC is done with it. Never OK, since the writer has not finished.
      mu_.Await(absl::Condition(
          +[](std::optional<absl::Status>* s) { return s->has_value(); }, &status_));
      return *status_;
    }
    request_.Swap(&request);
    in_flight_.push_back(update.sequence);
    writing_ = true;
    ++starting_;
  }
  StartWrite(&request_);
  {
    absl::MutexLock lock(&mu_);
    --starting_;
  }
  MaybeReleaseHold();
  return absl::OkStatus();
}

absl::StatusOr<UpdateAck> RowWriter::NextAck() {
  absl::MutexLock lock(&mu_);
  if (acks_.empty() && in_flight_.empty()) {
    return absl::FailedPreconditionError("every message sent has been acknowledged");
  }
  auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !acks_.empty() || status_.has_value();
  };
  mu_.Await(absl::Condition(&ready));
  if (acks_.empty()) {
    return *status_;  // never OK with a message in flight (OnDone)
  }
  UpdateAck ack = std::move(acks_.front());
  acks_.pop_front();
  return ack;
}

absl::StatusOr<UpdateAck> RowWriter::Write(const RowUpdate& update) {
  if (const int64_t n = unacknowledged(); n > 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("Write with ", n, " acks outstanding; read them with NextAck first"));
  }
  if (absl::Status s = Send(update); !s.ok()) {
    return s;
  }
  return NextAck();
}

absl::Status RowWriter::Finish() {
  bool writes_done = false;
  {
    absl::MutexLock lock(&mu_);
    if (!finished_) {
      finished_ = true;
      auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !writing_; };
      mu_.Await(absl::Condition(&idle));
      if (!ended_) {
        writes_done = writes_done_ = true;
        ++starting_;
      }
    }
  }
  if (writes_done) {
    StartWritesDone();
    absl::MutexLock lock(&mu_);
    --starting_;
  }
  MaybeReleaseHold();
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](std::optional<absl::Status>* s) { return s->has_value(); }, &status_));
  return *status_;
}

int64_t RowWriter::unacknowledged() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(in_flight_.size() + acks_.size());
}

void RowWriter::OnWriteDone(bool ok) {
  {
    absl::MutexLock lock(&mu_);
    writing_ = false;
    if (!ok) {
      ended_ = true;  // the message stays in flight: NextAck answers it with the stream's status
    }
  }
  MaybeReleaseHold();
}

void RowWriter::OnReadDone(bool ok) {
  absl::Status error;
  {
    absl::MutexLock lock(&mu_);
    if (!ok) {
      ended_ = true;  // the server has ended the stream (or the call was cancelled)
    } else if (in_flight_.empty()) {
      error = absl::InternalError(absl::StrCat("server acknowledged sequence ",
                                               response_.sequence(), " with no message in flight"));
    } else if (response_.sequence() != in_flight_.front()) {
      error = absl::InternalError(
          absl::StrCat("server acknowledged sequence ", response_.sequence(),
                       " where the oldest message in flight has sequence ", in_flight_.front()));
    } else {
      in_flight_.pop_front();
      UpdateAck ack;
      ack.table = std::move(*response_.mutable_table());
      ack.sequence = response_.sequence();
      ack.rows = response_.rows();
      acks_.push_back(std::move(ack));
    }
    if (!error.ok()) {
      error_ = error;
      ended_ = true;
    }
  }
  if (!error.ok()) {
    ctx_.TryCancel();
  } else if (ok) {
    StartRead(&response_);
    return;
  }
  MaybeReleaseHold();
}

void RowWriter::OnDone(const grpc::Status& grpc_status) {
  absl::MutexLock lock(&mu_);
  absl::Status status = FromAdminStatus(grpc_status);
  if (error_.has_value()) {
    status = *error_;
  } else if (status.ok() && !in_flight_.empty()) {
    status = absl::InternalError(absl::StrCat("server ended the stream OK with ", in_flight_.size(),
                                              " messages unacknowledged, from sequence ",
                                              in_flight_.front()));
  } else if (status.ok() && !writes_done_) {
    status = absl::InternalError("server ended the stream OK before the writer finished");
  }
  status_ = std::move(status);
}

void RowWriter::MaybeReleaseHold() {
  {
    absl::MutexLock lock(&mu_);
    if (hold_released_ || starting_ > 0 || !(ended_ || writes_done_)) {
      return;
    }
    hold_released_ = true;
  }
  RemoveHold();
}

AdminClient::AdminClient(std::shared_ptr<grpc::Channel> channel)
    : channel_(std::move(channel)), stub_(pb::EmbeddingAdminService::NewStub(channel_)) {}

std::unique_ptr<AdminClient> AdminClient::Connect(const std::string& target,
                                                  const std::optional<TlsOptions>& tls) {
  return std::make_unique<AdminClient>(CreateChannel(target, tls));
}

absl::StatusOr<std::unique_ptr<RowWriter>> AdminClient::OpenWriter(absl::Duration timeout,
                                                                   int64_t max_unacked) {
  if (absl::Status s = CheckTimeout(timeout); !s.ok()) {
    return s;
  }
  if (max_unacked < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_unacked must be at least 1, got ", max_unacked));
  }
  return std::unique_ptr<RowWriter>(new RowWriter(stub_.get(), timeout, max_unacked));
}

absl::StatusOr<UpdateAck> AdminClient::UpdateRows(const RowUpdate& update, absl::Duration timeout) {
  absl::StatusOr<std::unique_ptr<RowWriter>> writer = OpenWriter(timeout);
  if (!writer.ok()) {
    return writer.status();
  }
  absl::StatusOr<UpdateAck> ack = (*writer)->Write(update);
  if (!ack.ok()) {
    return ack.status();
  }
  if (absl::Status s = (*writer)->Finish(); !s.ok()) {
    return s;
  }
  return ack;
}

absl::StatusOr<SavedVersion> AdminClient::SaveTable(absl::string_view table,
                                                    absl::Duration timeout) {
  if (absl::Status s = CheckTimeout(timeout); !s.ok()) {
    return s;
  }
  grpc::ClientContext ctx;
  SetDeadline(timeout, &ctx);
  pb::SaveTableRequest request;
  request.set_table(std::string(table));
  pb::SaveTableResponse response;
  if (grpc::Status s = stub_->SaveTable(&ctx, request, &response); !s.ok()) {
    return FromAdminStatus(s);
  }
  SavedVersion saved;
  saved.table = std::move(*response.mutable_table());
  saved.version = response.version();
  saved.sequence = response.sequence();
  saved.path = std::move(*response.mutable_path());
  saved.bytes = response.bytes();
  return saved;
}

absl::StatusOr<LoadedVersion> AdminClient::LoadVersion(absl::string_view table, int64_t version,
                                                       absl::Duration timeout) {
  if (absl::Status s = CheckTimeout(timeout); !s.ok()) {
    return s;
  }
  if (version < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("version must be 0 (the newest) or a version number, got ", version));
  }
  grpc::ClientContext ctx;
  SetDeadline(timeout, &ctx);
  pb::LoadVersionRequest request;
  request.set_table(std::string(table));
  request.set_version(version);
  pb::LoadVersionResponse response;
  if (grpc::Status s = stub_->LoadVersion(&ctx, request, &response); !s.ok()) {
    return FromAdminStatus(s);
  }
  LoadedVersion loaded;
  loaded.table = std::move(*response.mutable_table());
  loaded.version = response.version();
  loaded.sequence = response.sequence();
  loaded.pinned = response.pinned();
  return loaded;
}

}  // namespace emb::client
