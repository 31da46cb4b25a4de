#include "client/sharded_client.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/blocking_counter.h"

namespace emb::client {

std::string ShardServiceConfig(int max_attempts) {
  return absl::StrFormat(R"json({
  "loadBalancingConfig": [{"round_robin": {}}],
  "methodConfig": [{
    "name": [{"service": "embedding.v1.EmbeddingService"}],
    "retryPolicy": {
      "maxAttempts": %d,
      "initialBackoff": "0.01s",
      "maxBackoff": "0.2s",
      "backoffMultiplier": 2,
      "retryableStatusCodes": ["UNAVAILABLE"]
    }
  }]
})json",
                         std::clamp(max_attempts, 2, 5));
}

absl::StatusOr<ShardSplit> SplitIds(absl::Span<const int64_t> ids, const ShardLayout& layout) {
  const size_t n = layout.first_rows.size();
  ShardSplit split;
  split.ids.resize(n);
  split.positions.resize(n);
  for (size_t i = 0; i < ids.size(); ++i) {
    const int64_t id = ids[i];
    if (id < 0) {  // as a server answers it
      return absl::InvalidArgumentError(absl::StrCat("ids[", i, "] = ", id, " is negative"));
    }
    if (id >= layout.whole_rows) {
      return absl::OutOfRangeError(absl::StrCat(
          "ids[", i, "] = ", id, " is out of range for table '", layout.table, "' with ",
          layout.whole_rows, " rows over ", n, " shards (valid: 0..", layout.whole_rows - 1, ")"));
    }
    const auto k = static_cast<size_t>(id / layout.block_rows);
    split.ids[k].push_back(id);
    split.positions[k].push_back(i);
  }
  return split;
}

void PlaceRows(absl::string_view rows, absl::Span<const size_t> positions, size_t row_bytes,
               std::string* answer) {
  for (size_t j = 0; j < positions.size(); ++j) {
    std::memcpy(answer->data() + positions[j] * row_bytes, rows.data() + j * row_bytes, row_bytes);
  }
}

absl::StatusOr<std::unique_ptr<ShardedClient>> ShardedClient::Connect(
    std::vector<std::string> targets, const ShardedClientOptions& options) {
  if (targets.empty()) {
    return absl::InvalidArgumentError("a sharded table needs the target of each shard; none given");
  }
  std::vector<std::unique_ptr<EmbeddingClient>> shards;
  for (const std::string& target : targets) {
    grpc::ChannelArguments args = DefaultChannelArguments();
    args.SetServiceConfigJSON(ShardServiceConfig(options.max_attempts));
    shards.push_back(std::make_unique<EmbeddingClient>(CreateChannel(target, options.tls, args)));
  }
  return std::unique_ptr<ShardedClient>(new ShardedClient(std::move(targets), std::move(shards)));
}

absl::Status ShardedClient::ShardError(int k, const absl::Status& status) const {
  return absl::Status(status.code(),
                      absl::StrCat("shard ", k, " of ", shards(), " (",
                                   targets_[static_cast<size_t>(k)], "): ", status.message()));
}

void ShardedClient::ForgetLayouts() {
  absl::MutexLock lock(&mu_);
  layouts_.clear();
}

absl::StatusOr<ShardLayout> ShardedClient::Layout(const std::string& table,
                                                  absl::Duration timeout) {
  if (timeout <= absl::ZeroDuration() || timeout == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError("the timeout must be positive and finite");
  }
  {
    absl::MutexLock lock(&mu_);
    if (auto it = layouts_.find(table); it != layouts_.end()) {
      return it->second;
    }
  }
  absl::StatusOr<ShardLayout> layout = LearnLayout(table, absl::Now() + timeout);
  if (layout.ok()) {
    absl::MutexLock lock(&mu_);
    layouts_.emplace(table, *layout);
  }
  return layout;
}

absl::StatusOr<ShardLayout> ShardedClient::LearnLayout(const std::string& table,
                                                       absl::Time deadline) {
  const int n = shards();
  ShardLayout layout;
  for (int k = 0; k < n; ++k) {
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      return ShardError(k, absl::DeadlineExceededError(
                               "the deadline passed while asking the shards for the table"));
    }
    absl::StatusOr<std::vector<TableInfo>> tables =
        shards_[static_cast<size_t>(k)]->ListTables(left);
    if (!tables.ok()) {
      return ShardError(k, tables.status());
    }
    auto it = std::find_if(tables->begin(), tables->end(), [&](const TableInfo& t) {
      return table.empty() ? t.is_default : t.name == table;
    });
    if (it == tables->end()) {
      return ShardError(k, absl::NotFoundError(absl::StrCat("no table '", table, "'")));
    }
    const TableInfo& t = *it;
    // A server with no --shard holds the whole table: shard 0 of 1.
    const int index = t.shard_count > 0 ? t.shard_index : 0;
    const int count = t.shard_count > 0 ? t.shard_count : 1;
    if (index != k || count != n) {
      return ShardError(
          k, absl::FailedPreconditionError(absl::StrCat(
                 "table '", t.name, "' there is shard ", index, " of ", count, ", not shard ", k,
                 " of ", n, ": give the shards' targets in shard order, one per shard")));
    }
    if (k == 0) {
      layout.table = t.name;
      layout.whole_rows = t.whole_rows;
      layout.dim = t.dim;
      layout.dtype = t.dtype;
      layout.block_rows = (t.whole_rows + n - 1) / n;
      layout.version = t.version;
    } else if (t.name != layout.table || t.whole_rows != layout.whole_rows || t.dim != layout.dim ||
               t.dtype != layout.dtype) {
      return ShardError(k, absl::FailedPreconditionError(absl::StrFormat(
                               "table '%s' there has %d rows x %d %s, but on shard 0 '%s' has "
                               "%d rows x %d %s: the shards serve different tables",
                               t.name, t.whole_rows, t.dim, DataTypeName(t.dtype), layout.table,
                               layout.whole_rows, layout.dim, DataTypeName(layout.dtype))));
    }
    if (t.version != layout.version) {
      return ShardError(k, absl::FailedPreconditionError(absl::StrCat(
                               "table '", t.name, "' there is version ", t.version,
                               ", but on shard 0 version ", layout.version,
                               ": the shards serve different versions of the table, whose rows "
                               "must not be mixed in one answer (load the same version on every "
                               "shard, then look up again)")));
    }
    if (t.first_row != static_cast<int64_t>(k) * layout.block_rows) {
      return ShardError(k, absl::FailedPreconditionError(absl::StrCat(
                               "table '", t.name, "' there starts at row ", t.first_row,
                               ", not at ", static_cast<int64_t>(k) * layout.block_rows)));
    }
    layout.first_rows.push_back(t.first_row);
    layout.rows.push_back(t.rows);
  }
  return layout;
}

absl::StatusOr<LookUpResult> ShardedClient::LookUp(const LookUpRequestSpec& spec,
                                                   absl::Duration timeout) {
  if (timeout <= absl::ZeroDuration() || timeout == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError("the timeout must be positive and finite");
  }
  if (spec.pooling != Pooling::kNone) {
    return absl::UnimplementedError(
        "pooled lookups over shards are not supported: pool on one server that holds the whole "
        "table, or look the rows up and pool them yourself");
  }
  int64_t elements = 1;
  for (const int64_t d : spec.shape) {
    elements = d < 0 || (d > 0 && elements > INT64_MAX / d) ? -1 : elements * d;
  }
  if (!spec.shape.empty() && elements != static_cast<int64_t>(spec.ids.size())) {
    return absl::InvalidArgumentError(absl::StrCat("shape [", absl::StrJoin(spec.shape, ", "),
                                                   "] does not hold the ", spec.ids.size(),
                                                   " ids"));
  }
  const absl::Time deadline = absl::Now() + timeout;
  absl::StatusOr<ShardLayout> layout = Layout(spec.table, timeout);
  if (!layout.ok()) {
    return layout.status();
  }
  absl::StatusOr<ShardSplit> split = SplitIds(spec.ids, *layout);
  if (!split.ok()) {
    return split.status();
  }
  const int n = shards();
  LookUpResult result;
  result.shape =
      spec.shape.empty() ? std::vector<int64_t>{static_cast<int64_t>(spec.ids.size())} : spec.shape;
  result.shape.push_back(layout->dim);
  result.dtype =
      spec.dtype.value_or(IsValueType(layout->dtype) ? layout->dtype : DataType::kFloat32);
  const size_t row_bytes = static_cast<size_t>(layout->dim) * ElementSize(result.dtype);
  result.data.resize(spec.ids.size() * row_bytes);

  // Every shard with ids, in parallel; each writes its rows into place as it answers.
  std::vector<absl::Status> statuses(static_cast<size_t>(n));
  int calls = 0;
  for (const auto& ids : split->ids) {
    calls += ids.empty() ? 0 : 1;
  }
  absl::BlockingCounter done(calls);
  const std::vector<std::vector<size_t>>& positions = split->positions;
  for (int k = 0; k < n; ++k) {
    if (split->ids[static_cast<size_t>(k)].empty()) {
      continue;
    }
    LookUpRequestSpec part;
    part.table = layout->table;
    part.ids = std::move(split->ids[static_cast<size_t>(k)]);
    part.dtype = result.dtype;
    shards_[static_cast<size_t>(k)]->LookUpAsync(
        part, std::max(deadline - absl::Now(), absl::Nanoseconds(1)),
        [&, k](absl::StatusOr<LookUpResult> answer) {
          const auto kk = static_cast<size_t>(k);
          if (!answer.ok()) {
            statuses[kk] = answer.status();
          } else if (answer->dtype != result.dtype ||
                     answer->data.size() != positions[kk].size() * row_bytes) {
            statuses[kk] = absl::InternalError(absl::StrCat(
                "answered ", answer->data.size(), " bytes of ", DataTypeName(answer->dtype),
                " for ", positions[kk].size(), " ids; expected ", positions[kk].size() * row_bytes,
                " of ", DataTypeName(result.dtype)));
          } else {
            PlaceRows(answer->data, positions[kk], row_bytes, &result.data);
          }
          done.DecrementCount();
        });
  }
  done.Wait();
  for (int k = 0; k < n; ++k) {
    if (const absl::Status& s = statuses[static_cast<size_t>(k)]; !s.ok()) {
      const auto others = std::count_if(statuses.begin() + k + 1, statuses.end(),
                                        [](const absl::Status& o) { return !o.ok(); });
      absl::Status named = ShardError(k, s);
      if (others > 0) {
        named = absl::Status(
            named.code(), absl::StrCat(named.message(), " (and ", others, " more shards failed)"));
      }
      return named;
    }
  }
  return result;
}

}  // namespace emb::client
