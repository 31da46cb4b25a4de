// embedding-client lookup, and the flags that shape its request (--shape, --pooling, ...).
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "client/cli/commands.h"
#include "client/cli/common.h"
#include "client/cli/flags.h"
#include "client/embedding_client.h"
#include "client/sharded_client.h"
#include "kernels/data_type.h"

namespace emb::client::cli {
namespace {

// The entries of a list flag (`flag`, e.g. "--offsets") as integers.
absl::StatusOr<std::vector<int64_t>> IntsFromFlag(absl::string_view flag,
                                                  const std::vector<std::string>& entries) {
  std::vector<int64_t> values;
  for (const std::string& e : entries) {
    int64_t v;
    if (!absl::SimpleAtoi(e, &v)) {
      return absl::InvalidArgumentError(absl::StrCat("bad ", flag, " entry \"", e, "\""));
    }
    values.push_back(v);
  }
  return values;
}

// Fills the pooling fields of `spec` from --pooling, --offsets, --lengths and --weights. Only
// their spelling is checked here; the server checks the bags (INVALID_ARGUMENT naming the
// problem).
absl::Status PoolingFromFlags(LookUpRequestSpec* spec) {
  if (const std::string name = absl::GetFlag(FLAGS_pooling);
      !name.empty() && !ParsePooling(name, &spec->pooling)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--pooling must be sum or mean, got \"", name, "\""));
  }
  absl::StatusOr<std::vector<int64_t>> offsets =
      IntsFromFlag("--offsets", absl::GetFlag(FLAGS_offsets));
  if (!offsets.ok()) {
    return offsets.status();
  }
  absl::StatusOr<std::vector<int64_t>> lengths =
      IntsFromFlag("--lengths", absl::GetFlag(FLAGS_lengths));
  if (!lengths.ok()) {
    return lengths.status();
  }
  spec->offsets = *std::move(offsets);
  spec->lengths = *std::move(lengths);
  for (const std::string& e : absl::GetFlag(FLAGS_weights)) {
    float w;
    if (!absl::SimpleAtof(e, &w)) {
      return absl::InvalidArgumentError(absl::StrCat("bad --weights entry \"", e, "\""));
    }
    spec->weights.push_back(w);
  }
  return absl::OkStatus();
}

absl::Status ParseIds(const std::vector<std::string>& tokens, std::vector<int64_t>* ids) {
  for (const std::string& token : tokens) {
    int64_t id;
    if (!absl::SimpleAtoi(token, &id)) {
      return absl::InvalidArgumentError(absl::StrCat("not an id: \"", token, "\""));
    }
    ids->push_back(id);
  }
  return absl::OkStatus();
}

absl::Status ReadIdsFile(const std::string& path, std::vector<int64_t>* ids) {
  std::ifstream in(path);
  if (!in) {
    return absl::NotFoundError(absl::StrCat("cannot open --ids_file ", path));
  }
  std::stringstream text;
  text << in.rdbuf();
  std::vector<std::string> tokens =
      absl::StrSplit(text.str(), absl::ByAnyChar(" \t\r\n,"), absl::SkipEmpty());
  return ParseIds(tokens, ids);
}

// One LookUp: EmbeddingClient's, or ShardedClient's over --shards.
using LookUpCall =
    absl::FunctionRef<absl::StatusOr<LookUpResult>(const LookUpRequestSpec&, absl::Duration)>;

int RunLookUp(LookUpCall look_up, const std::vector<std::string>& args) {
  LookUpRequestSpec spec;
  spec.table = absl::GetFlag(FLAGS_table);
  if (absl::Status s = ParseIds(args, &spec.ids); !s.ok()) {
    return Fail("lookup", s);
  }
  if (const std::string path = absl::GetFlag(FLAGS_ids_file); !path.empty()) {
    if (absl::Status s = ReadIdsFile(path, &spec.ids); !s.ok()) {
      return Fail("lookup", s);
    }
  }
  for (const std::string& d : absl::GetFlag(FLAGS_shape)) {
    int64_t v;
    if (!absl::SimpleAtoi(d, &v)) {
      return Fail("lookup", absl::InvalidArgumentError(absl::StrCat("bad --shape entry ", d)));
    }
    spec.shape.push_back(v);
  }
  absl::StatusOr<std::optional<DataType>> dtype = DtypeFromFlag();
  if (!dtype.ok()) {
    return Fail("lookup", dtype.status());
  }
  spec.dtype = *dtype;
  if (absl::Status s = PoolingFromFlags(&spec); !s.ok()) {
    return Fail("lookup", s);
  }
  absl::StatusOr<LookUpResult> result = look_up(spec, absl::GetFlag(FLAGS_timeout).value);
  if (!result.ok()) {
    return Fail("lookup", result.status());
  }
  std::string out = absl::StrCat("shape [", absl::StrJoin(result->shape, ", "), "]\n", "dtype ",
                                 DataTypeName(result->dtype), "\n");
  const std::vector<float> values = result->ToFloat32();
  const int64_t dim = result->shape.back();
  // One line a row: "ID: values" for a row per id, "bag B: values" for a pooled bag.
  const bool pooled = spec.pooling != Pooling::kNone;
  const bool exact = absl::GetFlag(FLAGS_exact);
  for (size_t row = 0; dim > 0 && (row + 1) * dim <= values.size(); ++row) {
    if (pooled) {
      absl::StrAppend(&out, "bag ", row, ":");
    } else {
      absl::StrAppend(&out, row < spec.ids.size() ? absl::StrCat(spec.ids[row]) : "?", ":");
    }
    for (int64_t j = 0; j < dim; ++j) {
      if (exact) {
        absl::StrAppendFormat(&out, " %.9g", values[row * dim + j]);
      } else {
        absl::StrAppend(&out, " ", values[row * dim + j]);
      }
    }
    absl::StrAppend(&out, "\n");
  }
  std::cout << out;
  return 0;
}

}  // namespace

int LookUpCommand(const std::vector<std::string>& args, const std::optional<TlsOptions>& tls) {
  if (std::vector<std::string> shards = absl::GetFlag(FLAGS_shards); !shards.empty()) {
    for (std::string& shard : shards) {
      shard = TargetWithDefaultPort(shard, kLookUpPort);
    }
    absl::StatusOr<std::unique_ptr<ShardedClient>> sharded =
        ShardedClient::Connect(shards, ShardedClientOptions{tls});
    if (!sharded.ok()) {
      return Fail("lookup", sharded.status());
    }
    return RunLookUp([&](const LookUpRequestSpec& spec,
                         absl::Duration timeout) { return (*sharded)->LookUp(spec, timeout); },
                     args);
  }
  std::unique_ptr<EmbeddingClient> client = EmbeddingClient::Connect(LookUpTarget(), tls);
  return RunLookUp([&](const LookUpRequestSpec& spec,
                       absl::Duration timeout) { return client->LookUp(spec, timeout); },
                   args);
}

}  // namespace emb::client::cli
