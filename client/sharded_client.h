// ShardedClient: looks up a table whose rows are split over servers (each started with
// --shard=K/N), as one table.
//
// Given one target per shard, in shard order, it learns each table's split from the shards'
// ListTables, splits each request's ids by the shard that holds them, calls those shards in
// parallel under the caller's deadline, and puts the rows back in the request's order. A shard
// that fails fails the whole call, with that shard named; there is never a partial answer.
//
// Each shard's replicas are found and balanced by gRPC itself: a target such as
// "dns:///embedding-server-shard-0.NAMESPACE.svc.cluster.local:50051" (a headless Service) resolves
// to every replica, the channel balances round_robin over them, and a call that fails UNAVAILABLE
// on one is retried on another (ShardServiceConfig). Thread-safe.
#ifndef EMB_CLIENT_SHARDED_CLIENT_H_
#define EMB_CLIENT_SHARDED_CLIENT_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "client/embedding_client.h"

namespace emb::client {

// The service config of every shard's channel: round_robin over the addresses the target
// resolves to, and up to `max_attempts` attempts of a call that fails UNAVAILABLE (gRPC's retry
// policy, with backoff from 10 ms to 200 ms).
std::string ShardServiceConfig(int max_attempts);

struct ShardedClientOptions {
  std::optional<TlsOptions> tls;
  // Attempts of a call per shard, the first included (gRPC allows up to 5).
  int max_attempts = 3;
};

// How a table's rows are split: shard k holds rows [first_rows[k], first_rows[k] + rows[k]).
struct ShardLayout {
  std::string table;  // as the shards name it (the default table's name for an empty request)
  int64_t whole_rows = 0;
  int64_t dim = 0;
  DataType dtype = DataType::kFloat32;  // the table's; a quantized table answers float32
  int64_t block_rows = 0;               // ceil(whole_rows / shards)
  int64_t version = 0;  // the version every shard serves (TableInfo.version; 0: not versioned)
  std::vector<int64_t> first_rows;
  std::vector<int64_t> rows;
};

// A request's ids split by the shard that holds them: shard k gets ids[k] (in request order),
// whose rows go to answer rows positions[k].
struct ShardSplit {
  std::vector<std::vector<int64_t>> ids;
  std::vector<std::vector<size_t>> positions;
};

// Splits `ids` over `layout`'s shards. OUT_OF_RANGE naming the first id outside the whole table.
absl::StatusOr<ShardSplit> SplitIds(absl::Span<const int64_t> ids, const ShardLayout& layout);

// Copies shard rows `rows` (row_bytes each, in the order of `positions`) to their answer rows in
// `answer`.
void PlaceRows(absl::string_view rows, absl::Span<const size_t> positions, size_t row_bytes,
               std::string* answer);

class ShardedClient {
 public:
  // One target per shard, shard 0 first. INVALID_ARGUMENT for an empty list. Connects lazily, as
  // EmbeddingClient does.
  static absl::StatusOr<std::unique_ptr<ShardedClient>> Connect(
      std::vector<std::string> targets, const ShardedClientOptions& options = {});

  ShardedClient(const ShardedClient&) = delete;
  ShardedClient& operator=(const ShardedClient&) = delete;

  // Looks up `spec.ids` (global ids of the whole table, row-major over `spec.shape`) across the
  // shards, as EmbeddingClient::LookUp does on one server. Without calling: INVALID_ARGUMENT for
  // a timeout that is not positive and finite, UNIMPLEMENTED for a pooled lookup (pool on one
  // server, or pool the rows yourself); naming the first id outside the whole table, as a
  // server answers it: INVALID_ARGUMENT for a negative id, OUT_OF_RANGE for one past the table. A
  // shard's failure comes back with its own code and "shard K of N (TARGET): " before its message;
  // where several fail, the lowest shard's, with the number of others.
  absl::StatusOr<LookUpResult> LookUp(const LookUpRequestSpec& spec, absl::Duration timeout);

  // The table's split (learned from the shards' ListTables on first use, then kept).
  // FAILED_PRECONDITION naming the shard when the shards disagree: a shard that is not shard K
  // of N of the table at position K, or different rows, dims, types or versions (TableInfo.version:
  // rows of two versions are never mixed in one answer); a shard's own error as LookUp names it.
  // The versions are compared when the split is learned: a shard that swaps in another version
  // later is seen after ForgetLayouts().
  absl::StatusOr<ShardLayout> Layout(const std::string& table, absl::Duration timeout);

  // Forgets the learned splits (after the shards are redeployed with another split).
  void ForgetLayouts();

  int shards() const { return static_cast<int>(shards_.size()); }
  const std::string& target(int shard) const { return targets_[static_cast<size_t>(shard)]; }

 private:
  ShardedClient(std::vector<std::string> targets,
                std::vector<std::unique_ptr<EmbeddingClient>> shards)
      : targets_(std::move(targets)), shards_(std::move(shards)) {}

  // `status` of shard `k`, with the shard named.
  absl::Status ShardError(int k, const absl::Status& status) const;
  absl::StatusOr<ShardLayout> LearnLayout(const std::string& table, absl::Time deadline);

  const std::vector<std::string> targets_;
  const std::vector<std::unique_ptr<EmbeddingClient>> shards_;
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, ShardLayout> layouts_ ABSL_GUARDED_BY(mu_);
};

}  // namespace emb::client

#endif  // EMB_CLIENT_SHARDED_CLIENT_H_
