// embedding-client lookup-features: every feature of a batch in one LookUpFeatures call.
#include <cstdint>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "client/cli/commands.h"
#include "client/cli/common.h"
#include "client/cli/flags.h"
#include "client/embedding_client.h"

namespace emb::client::cli {
namespace {

absl::Status ParseList(absl::string_view what, absl::string_view text, std::vector<int64_t>* out) {
  for (absl::string_view e : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    int64_t v;
    if (!absl::SimpleAtoi(e, &v)) {
      return absl::InvalidArgumentError(absl::StrCat("bad ", what, " entry \"", e, "\""));
    }
    out->push_back(v);
  }
  return absl::OkStatus();
}

// One feature as the command line gives it: [NAME=]TABLE:IDS[:LENGTHS[:POOLING]], the lists
// comma-separated (an empty LENGTHS: one id a sample), e.g. "clicks=items:3,5,7:2,1:sum".
absl::StatusOr<FeatureSpec> ParseFeature(absl::string_view text) {
  FeatureSpec f;
  if (const size_t eq = text.find('='); eq != absl::string_view::npos) {
    f.name = std::string(text.substr(0, eq));
    text.remove_prefix(eq + 1);
  }
  const std::vector<absl::string_view> parts = absl::StrSplit(text, ':');
  if (parts.size() < 2 || parts.size() > 4) {
    return absl::InvalidArgumentError(
        absl::StrCat("feature \"", text, "\" is not [NAME=]TABLE:IDS[:LENGTHS[:POOLING]]"));
  }
  f.table = std::string(parts[0]);
  if (f.name.empty()) {
    f.name = f.table;
  }
  if (absl::Status s = ParseList("ids", parts[1], &f.ids); !s.ok()) {
    return s;
  }
  if (parts.size() > 2) {
    if (absl::Status s = ParseList("lengths", parts[2], &f.lengths); !s.ok()) {
      return s;
    }
  }
  if (parts.size() > 3 && !ParsePooling(parts[3], &f.pooling)) {
    return absl::InvalidArgumentError(
        absl::StrCat("pooling must be none, sum or mean, got \"", parts[3], "\""));
  }
  return f;
}

void AppendRow(const std::vector<float>& values, bool exact, std::string* out) {
  for (float v : values) {
    if (exact) {
      absl::StrAppendFormat(out, " %.9g", v);
    } else {
      absl::StrAppend(out, " ", v);
    }
  }
  absl::StrAppend(out, "\n");
}

}  // namespace

int FeaturesCommand(const std::vector<std::string>& args, const std::optional<TlsOptions>& tls) {
  constexpr absl::string_view kCommand = "lookup-features";
  std::vector<FeatureSpec> features;
  for (const std::string& arg : args) {
    absl::StatusOr<FeatureSpec> f = ParseFeature(arg);
    if (!f.ok()) {
      return Fail(kCommand, f.status());
    }
    features.push_back(*std::move(f));
  }
  absl::StatusOr<std::optional<DataType>> dtype = DtypeFromFlag();
  if (!dtype.ok()) {
    return Fail(kCommand, dtype.status());
  }
  std::unique_ptr<EmbeddingClient> client = EmbeddingClient::Connect(LookUpTarget(), tls);
  absl::StatusOr<FeaturesResult> result = client->LookUpFeatures(
      absl::GetFlag(FLAGS_batch_size), features, *dtype, absl::GetFlag(FLAGS_timeout).value);
  if (!result.ok()) {
    return Fail(kCommand, result.status());
  }
  // Per feature, one line a sample (pooled) or an id (not pooled).
  const bool exact = absl::GetFlag(FLAGS_exact);
  std::string out =
      absl::StrCat("batch_size ", result->batch_size, "\ndtype ", DataTypeName(result->dtype),
                   "\npooled_width ", result->pooled_width, "\n");
  for (size_t f = 0; f < result->features.size(); ++f) {
    const FeaturesResult::Feature& a = result->features[f];
    absl::StrAppend(&out, "feature ", a.name, " dim ", a.dim,
                    a.pooled ? absl::StrCat(" pooled at column ", a.pooled_column) : " not pooled",
                    "\n");
    const int64_t rows =
        a.pooled ? result->batch_size
                 : static_cast<int64_t>(a.embeddings.size() / (a.dim * ElementSize(result->dtype)));
    for (int64_t r = 0; r < rows; ++r) {
      absl::StrAppend(&out, a.pooled ? "sample " : "id ",
                      a.pooled ? r : features[f].ids[static_cast<size_t>(r)], ":");
      AppendRow(a.pooled ? result->PooledRow(f, r) : result->Row(f, r), exact, &out);
    }
  }
  std::cout << out;
  return 0;
}

}  // namespace emb::client::cli
