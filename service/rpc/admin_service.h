// AdminServiceImpl: embedding.v1.EmbeddingAdminService, the write path (UpdateRows), served only
// on the admin listener the operator opens (service/server/server.h: --admin_address).
//
// Each UpdateRows stream is one UpdateRowsCall, its own reactor: it reads a message, checks the
// caller and the message, and hands it to its table's writer (service/write/table_writer.h), a
// thread of its own that prepares the rows (conversion, pinned staging, the copy to the device:
// work no gRPC reaction may wait for) and writes them between batches; once the rows are written
// the call sends the answer and reads the next message. One
// message of a stream is applied at a time, in order; the first that fails ends the stream with
// its status, after the answers of those before it. Callers are checked on every stream: where
// the admin port runs mutual TLS, the client certificate's identity (its SANs, else its CN)
// must be on the allow-list, else PERMISSION_DENIED. SaveTable writes a table loaded from a
// version directory as its next version (service/tables/table_versions.h); LoadVersion serves
// another version (version_loader.h). Both run on the service's one AdminWorker, in the order they
// arrive, with at most kMaxQueuedAdminJobs waiting.
// Thread-safe.
#ifndef EMB_SERVICE_RPC_ADMIN_SERVICE_H_
#define EMB_SERVICE_RPC_ADMIN_SERVICE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "embedding/v1/embedding_admin.grpc.pb.h"
#include "grpcpp/security/auth_metadata_processor.h"
#include "service/common/clock.h"
#include "service/rpc/admin_worker.h"
#include "service/rpc/embedding_service.h"

namespace emb::service {

struct AdminOptions {
  // The client identities (certificate SAN entries, or CN where it has none) that may write.
  // Empty with require_identity false: every caller that reaches the port may (plaintext on
  // loopback, --admin_insecure).
  std::vector<std::string> allowed_identities;
  // True where the admin port runs mutual TLS: a caller without an identity on the list gets
  // PERMISSION_DENIED.
  bool require_identity = true;
};

// How many saves and version loads may wait behind the one running; a call beyond them gets
// RESOURCE_EXHAUSTED.
inline constexpr size_t kMaxQueuedAdminJobs = 64;

// OK when one of the identities TLS verified for the caller (`auth`'s peer identity: the client
// certificate's SANs, else its CN) is in `allowed`; otherwise PERMISSION_DENIED naming what the
// caller presented and the flag.
absl::Status CheckAdminIdentity(const grpc::AuthContext* auth,
                                const absl::flat_hash_set<std::string>& allowed);

// The allow-list check as gRPC's auth metadata processor on the admin listener's credentials: it
// runs on a call's headers, so a caller off the list is refused before gRPC reads its message
// (which may be up to --admin_max_message_bytes) into memory. Non-blocking: it only compares
// strings, on the gRPC thread. The service checks again on every call (AdminServiceImpl).
class AdminAllowListProcessor final : public grpc::AuthMetadataProcessor {
 public:
  explicit AdminAllowListProcessor(const std::vector<std::string>& allowed_identities);

  bool IsBlocking() const override { return false; }
  grpc::Status Process(const InputMetadata& auth_metadata, grpc::AuthContext* context,
                       OutputMetadata* consumed_auth_metadata,
                       OutputMetadata* response_metadata) override;

 private:
  const absl::flat_hash_set<std::string> allowed_;
};

class UpdateRowsCall;

class AdminServiceImpl final : public embedding::v1::EmbeddingAdminService::CallbackService {
 public:
  // `clock` (for the update-latency histogram) must outlive the service.
  explicit AdminServiceImpl(AdminOptions options, Clock* clock = Clock::Real());
  // Shutdown() must have run and every stream must have ended (the admin gRPC server is down).
  ~AdminServiceImpl() override;

  // Makes the tables writable (through each one's TableWriter); until then UpdateRows answers
  // UNAVAILABLE. Call once.
  void SetTables(std::vector<ServedTable>* tables);
  // Ends every stream with UNAVAILABLE: a stream waiting for its next message at once, one whose
  // message is being applied once its answer is sent (so every answered message is applied).
  // Answers each queued save, version load and update message UNAVAILABLE without starting it,
  // and waits for the one running (of each table's writer) to finish and answer. Later calls get
  // UNAVAILABLE at once. Call before the admin grpc::Server's Shutdown, while the tables live (a
  // second call, the destructor's, leaves them alone).
  void Shutdown();

  grpc::ServerBidiReactor<embedding::v1::UpdateRowsRequest, embedding::v1::UpdateRowsResponse>*
  UpdateRows(grpc::CallbackServerContext* ctx) override;
  // Writes the table's next version on the worker (a save takes as long as the table's bytes take
  // to reach the disk), with the table's updates paused; answers when it is renamed. ABORTED while
  // a save of the table is queued or running, RESOURCE_EXHAUSTED when the worker's queue is full.
  grpc::ServerUnaryReactor* SaveTable(grpc::CallbackServerContext* ctx,
                                      const embedding::v1::SaveTableRequest* request,
                                      embedding::v1::SaveTableResponse* response) override;
  // Loads and swaps in a version (version_loader.h) on the worker; RESOURCE_EXHAUSTED when its
  // queue is full.
  grpc::ServerUnaryReactor* LoadVersion(grpc::CallbackServerContext* ctx,
                                        const embedding::v1::LoadVersionRequest* request,
                                        embedding::v1::LoadVersionResponse* response) override;

 private:
  friend class UpdateRowsCall;
  // OK when the caller may write, else PERMISSION_DENIED saying why.
  absl::Status CheckCaller(const grpc::CallbackServerContext& ctx) const;
  // The table a unary admin call names, once the caller may write (CheckCaller); else why not.
  absl::StatusOr<ServedTable*> CallersTable(const grpc::CallbackServerContext& ctx,
                                            const std::string& table) const;
  void Forget(UpdateRowsCall* call);
  // SaveTable's work, on the worker.
  absl::Status Save(ServedTable& table, embedding::v1::SaveTableResponse* response);

  const AdminOptions options_;
  const absl::flat_hash_set<std::string> allowed_;
  Clock* const clock_;
  std::atomic<std::vector<ServedTable>*> tables_{nullptr};
  absl::Mutex mu_;
  bool shutting_down_ ABSL_GUARDED_BY(mu_) = false;
  absl::flat_hash_set<UpdateRowsCall*> calls_ ABSL_GUARDED_BY(mu_);
  // The tables with a save queued or running: a second save of one is refused.
  absl::flat_hash_set<const ServedTable*> saving_ ABSL_GUARDED_BY(mu_);
  AdminWorker worker_{kMaxQueuedAdminJobs, "saves and version loads", "the admin service's queue"};
};

}  // namespace emb::service

#endif  // EMB_SERVICE_RPC_ADMIN_SERVICE_H_
