// AdminServiceImpl: embedding.v1.EmbeddingAdminService, the write path (UpdateRows), served only
// on the admin listener the operator opens (service/server/server.h: --admin_address).
//
// Each UpdateRows stream is one UpdateRowsCall, its own reactor: it reads a message, checks the
// caller and the message, hands the update to its table's Batcher (which applies it at a batch
// boundary), and once the rows are written sends the answer and reads the next message. One
// message of a stream is applied at a time, in order; the first that fails ends the stream with
// its status, after the answers of those before it. Callers are checked on every stream: where
// the admin port runs mutual TLS, the client certificate's identity (its SANs, else its CN)
// must be on the allow-list, else PERMISSION_DENIED. SaveTable writes a table loaded from a
// version directory as its next version (service/tables/table_versions.h).
// Thread-safe.
#ifndef EMB_SERVICE_RPC_ADMIN_SERVICE_H_
#define EMB_SERVICE_RPC_ADMIN_SERVICE_H_

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "embedding/v1/embedding_admin.grpc.pb.h"
#include "service/common/clock.h"
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

class UpdateRowsCall;

class AdminServiceImpl final : public embedding::v1::EmbeddingAdminService::CallbackService {
 public:
  // `clock` (for the update-latency histogram) must outlive the service.
  explicit AdminServiceImpl(AdminOptions options, Clock* clock = Clock::Real());
  // Shutdown() must have run and every stream must have ended (the admin gRPC server is down).
  ~AdminServiceImpl() override;

  // Makes the tables writable; until then UpdateRows answers UNAVAILABLE. Call once.
  void SetTables(std::vector<ServedTable>* tables);
  // Ends every stream with UNAVAILABLE: a stream waiting for its next message at once, one whose
  // message is being applied once its answer is sent (so every answered message is applied).
  // Later streams get UNAVAILABLE at once. Call before the admin grpc::Server's Shutdown.
  void Shutdown();

  grpc::ServerBidiReactor<embedding::v1::UpdateRowsRequest, embedding::v1::UpdateRowsResponse>*
  UpdateRows(grpc::CallbackServerContext* ctx) override;
  // Writes the table's next version on a thread of its own (a save takes as long as the table's
  // bytes take to reach the disk), with the table's updates paused; answers when it is renamed.
  grpc::ServerUnaryReactor* SaveTable(grpc::CallbackServerContext* ctx,
                                      const embedding::v1::SaveTableRequest* request,
                                      embedding::v1::SaveTableResponse* response) override;
  // Loads and swaps in a version (version_loader.h) on a thread of its own.
  grpc::ServerUnaryReactor* LoadVersion(grpc::CallbackServerContext* ctx,
                                        const embedding::v1::LoadVersionRequest* request,
                                        embedding::v1::LoadVersionResponse* response) override;

 private:
  friend class UpdateRowsCall;
  // OK when the caller may write, else PERMISSION_DENIED saying why.
  absl::Status CheckCaller(const grpc::CallbackServerContext& ctx) const;
  void Forget(UpdateRowsCall* call);
  // SaveTable's work, on its thread.
  absl::Status Save(ServedTable& table, embedding::v1::SaveTableResponse* response);

  const AdminOptions options_;
  const absl::flat_hash_set<std::string> allowed_;
  Clock* const clock_;
  std::atomic<std::vector<ServedTable>*> tables_{nullptr};
  absl::Mutex mu_;
  bool shutting_down_ ABSL_GUARDED_BY(mu_) = false;
  absl::flat_hash_set<UpdateRowsCall*> calls_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> saves_ ABSL_GUARDED_BY(mu_);  // saves and loads; joined by Shutdown
};

}  // namespace emb::service

#endif  // EMB_SERVICE_RPC_ADMIN_SERVICE_H_
