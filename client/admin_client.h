// AdminClient: a typed C++ client for embedding.v1.EmbeddingAdminService, which overwrites rows of
// the tables a server serves, saves them as new versions and loads (pins) saved versions (the
// server's --admin_address listener; off unless the operator opens it).
//
// As in EmbeddingClient, every call takes a timeout, which becomes the RPC's deadline (for a
// RowWriter: the deadline of its whole stream), and errors come back as absl::Status with the
// server's gRPC code unchanged. An address without the admin service (a server's lookup port)
// answers UNIMPLEMENTED, whose message is then kNoAdminService. AdminClient and RowWriter are
// thread-safe.
#ifndef EMB_CLIENT_ADMIN_CLIENT_H_
#define EMB_CLIENT_ADMIN_CLIENT_H_

#include <grpcpp/channel.h>
#include <grpcpp/client_context.h>
#include <grpcpp/support/client_callback.h>

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "client/embedding_client.h"
#include "embedding/v1/embedding_admin.grpc.pb.h"
#include "kernels/data_type.h"

namespace emb::client {

// The message of an UNIMPLEMENTED answer: gRPC's own has no text.
inline constexpr char kNoAdminService[] =
    "this address serves no admin service (embedding.v1.EmbeddingAdminService): "
    "embedding-server serves it only on the port of its --admin_address, not on its lookup port "
    "(--grpc_address)";

// One UpdateRows message: rows to write over rows `ids` of `table` (empty: the server's default
// table). `rows` holds ids.size() rows of the table's dim elements of `dtype`, little-endian,
// row-major (EncodeRows makes them from floats); no `dtype` means the table's own type.
// `sequence` must be greater than the table's last applied one (TableInfo::sequence).
struct RowUpdate {
  std::string table;
  std::vector<int64_t> ids;
  std::string rows;
  std::optional<DataType> dtype;
  int64_t sequence = 0;
};

// The server's acknowledgement of one applied RowUpdate: its rows are visible to every LookUp
// that starts after it.
struct UpdateAck {
  std::string table;     // by name, also when the update left it empty
  int64_t sequence = 0;  // the update's sequence, now the table's last applied one
  int64_t rows = 0;      // rows written (distinct ids)
};

// The version that AdminClient::SaveTable wrote: the table as it was when the save began, its
// updates up to `sequence` included. A server restarted on the same version directory serves it,
// and ListTables reports its `version` and `sequence`.
struct SavedVersion {
  std::string table;     // by name, also when the request left it empty
  int64_t version = 0;   // the new version's number: its directory is DIR/<version>
  int64_t sequence = 0;  // the last update sequence applied to the rows saved
  std::string path;      // the file written, as the server sees it
  int64_t bytes = 0;     // bytes written
};

// The version that AdminClient::LoadVersion made the server serve: every LookUp that starts after
// the call returned reads it. ListTables reports its `version`, `sequence` and `pinned` (as
// TableInfo::version_pinned).
struct LoadedVersion {
  std::string table;     // by name, also when the request left it empty
  int64_t version = 0;   // the version served from now on (the newest, for a request of 0)
  int64_t sequence = 0;  // its last applied update sequence (from its metadata; 0 if none)
  bool pinned = false;   // whether polling (--version_poll_seconds) leaves the table on it
};

// `values` as little-endian elements of `dtype` (float16 and bfloat16 rounded to nearest even, as
// the server converts), for RowUpdate::rows.
std::string EncodeRows(absl::Span<const float> values, DataType dtype);

// Fills `out` from `update`. Exposed for callers that drive the generated stub themselves.
void ToUpdateRowsRequest(const RowUpdate& update, embedding::v1::UpdateRowsRequest* out);

// One UpdateRows stream, made by AdminClient::OpenWriter. Messages are applied in the order they
// are sent, each answered by one ack, in the same order. The first message the server cannot
// apply ends the stream with its status (the messages before it stay applied, and NextAck still
// returns their acks). Thread-safe: for example, one thread may Send while another reads NextAck.
//
// Send does not wait for the ack, so a publisher may keep messages in flight and read their acks
// later; acks are read off the wire as they arrive (a server is never held up by acks the caller
// has not asked for yet). Send waits while `max_unacked` messages are sent and not yet
// acknowledged by the server: that bounds what is in flight.
class RowWriter : private grpc::ClientBidiReactor<embedding::v1::UpdateRowsRequest,
                                                  embedding::v1::UpdateRowsResponse> {
 public:
  // Cancels the stream if Finish was not called (messages not yet acknowledged may or may not be
  // applied), and waits for gRPC to be done with it.
  ~RowWriter() override;

  RowWriter(const RowWriter&) = delete;
  RowWriter& operator=(const RowWriter&) = delete;

  // Sends `update` (copied; it need not outlive the call), after waiting for the write before it
  // and for room in the window. Returns the stream's status if it has already ended with an
  // error (an earlier message was refused: NOT_FOUND, INVALID_ARGUMENT, OUT_OF_RANGE,
  // FAILED_PRECONDITION, ..., or the deadline passed); FAILED_PRECONDITION after Finish.
  absl::Status Send(const RowUpdate& update);

  // The ack of the oldest message sent whose ack has not been returned yet, waiting for it. If
  // the stream ended before that message was applied: the stream's status (the server's error on
  // it, DEADLINE_EXCEEDED, UNAVAILABLE, ...). FAILED_PRECONDITION when every message sent has
  // been acknowledged already; INTERNAL if the server acknowledged another sequence.
  absl::StatusOr<UpdateAck> NextAck();

  // Send(update), then its ack. Only when no ack is outstanding (FAILED_PRECONDITION otherwise,
  // nothing sent).
  absl::StatusOr<UpdateAck> Write(const RowUpdate& update);

  // Ends the stream: no more messages; waits for the acks of those still outstanding (kept for
  // NextAck) and returns the stream's status, OK if every message sent was applied. Later calls
  // return the same status.
  absl::Status Finish();

  // Messages sent whose ack NextAck has not returned yet.
  int64_t unacknowledged() const;

 private:
  friend class AdminClient;

  RowWriter(embedding::v1::EmbeddingAdminService::Stub* stub, absl::Duration timeout,
            int64_t max_unacked);

  // The reactions, on gRPC's threads.
  void OnWriteDone(bool ok) override;
  void OnReadDone(bool ok) override;
  void OnDone(const grpc::Status& status) override;

  // Removes the hold that lets Send and Finish start operations from outside the reactions, once
  // none will be started any more (the stream has ended, or Finish has started WritesDone) and
  // none is being started. Called without `mu_`.
  void MaybeReleaseHold();

  grpc::ClientContext ctx_;
  const int64_t max_unacked_;
  embedding::v1::UpdateRowsRequest request_;    // written by Send while no write is in progress
  embedding::v1::UpdateRowsResponse response_;  // the read in progress (one is, until one fails)

  mutable absl::Mutex mu_;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;   // a StartWrite not yet done
  int starting_ ABSL_GUARDED_BY(mu_) = 0;       // Start* calls made outside mu_, not yet returned
  bool finished_ ABSL_GUARDED_BY(mu_) = false;  // Finish (or the destructor) was called
  bool writes_done_ ABSL_GUARDED_BY(mu_) = false;  // StartWritesDone was called
  bool ended_ ABSL_GUARDED_BY(mu_) = false;        // a read or write failed, or the writer gave up:
                                                   // nothing more will be started
  bool hold_released_ ABSL_GUARDED_BY(mu_) = false;
  std::deque<int64_t> in_flight_ ABSL_GUARDED_BY(mu_);      // sequences sent, not acked on the wire
  std::deque<UpdateAck> acks_ ABSL_GUARDED_BY(mu_);         // read, not yet returned by NextAck
  std::optional<absl::Status> error_ ABSL_GUARDED_BY(mu_);  // the client's own verdict
  std::optional<absl::Status> status_ ABSL_GUARDED_BY(mu_);  // set by OnDone
};

class AdminClient {
 public:
  // Messages a RowWriter keeps unacknowledged on the wire by default.
  static constexpr int64_t kDefaultMaxUnacked = 256;

  explicit AdminClient(std::shared_ptr<grpc::Channel> channel);

  // A client on CreateChannel(target, tls): plaintext unless `tls` is given (the server's admin
  // listener wants mutual TLS unless it runs with --admin_insecure on a loopback address).
  // Connects lazily: an unreachable target, or a refused TLS handshake, shows up as UNAVAILABLE
  // or DEADLINE_EXCEEDED on the first call.
  static std::unique_ptr<AdminClient> Connect(const std::string& target,
                                              const std::optional<TlsOptions>& tls = std::nullopt);

  AdminClient(const AdminClient&) = delete;
  AdminClient& operator=(const AdminClient&) = delete;

  // Opens an UpdateRows stream whose deadline is `timeout` from now. INVALID_ARGUMENT if
  // `timeout` is not positive and finite, or `max_unacked` < 1. The writer must not outlive
  // this client.
  absl::StatusOr<std::unique_ptr<RowWriter>> OpenWriter(absl::Duration timeout,
                                                        int64_t max_unacked = kDefaultMaxUnacked);

  // One update on a stream of its own: its ack, or the server's status (see RowWriter::Send).
  absl::StatusOr<UpdateAck> UpdateRows(const RowUpdate& update, absl::Duration timeout);

  // Has the server write `table` (empty: its default table) as it is now, its updates included,
  // as the next version of the table's version directory; returns once the version is complete
  // on disk. Updates of the table wait while it is written; lookups go on. Errors: the server's
  // status: NOT_FOUND (unknown table), FAILED_PRECONDITION (the table was not loaded from a
  // version directory, or it holds version 2^63-1), ABORTED (a save of the table is already
  // queued or running), RESOURCE_EXHAUSTED (the server's queue of saves and loads is full),
  // INTERNAL (the write failed; no version was left), UNAVAILABLE, PERMISSION_DENIED,
  // DEADLINE_EXCEEDED (the save may still complete); INVALID_ARGUMENT without calling if
  // `timeout` is not positive and finite.
  absl::StatusOr<SavedVersion> SaveTable(absl::string_view table, absl::Duration timeout);

  // Has the server serve `version` of `table` (empty: its default table) from the table's version
  // directory: loaded beside the served one, then swapped in between batches; returns once it is
  // served. Version 0 means the newest there, and unpins; any other version is served and pinned
  // (a rollback): the server's polling for newer versions leaves the table on it until a
  // LoadVersion of 0. Errors: the server's status: NOT_FOUND (unknown table), FAILED_PRECONDITION
  // (no version directory, a missing or broken version, another shape or type, or no room for
  // both copies: the served version stays), ABORTED (a save or load of the table is running),
  // RESOURCE_EXHAUSTED (the server's queue of saves and loads is full), UNAVAILABLE,
  // PERMISSION_DENIED, DEADLINE_EXCEEDED (the load may still complete);
  // INVALID_ARGUMENT without calling if `version` is negative or `timeout` is not positive and
  // finite.
  absl::StatusOr<LoadedVersion> LoadVersion(absl::string_view table, int64_t version,
                                            absl::Duration timeout);

  embedding::v1::EmbeddingAdminService::Stub* stub() const { return stub_.get(); }

 private:
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<embedding::v1::EmbeddingAdminService::Stub> stub_;
};

}  // namespace emb::client

#endif  // EMB_CLIENT_ADMIN_CLIENT_H_
