// The multi-feature lookup (embedding.v1.EmbeddingService/LookUpFeatures) as plain C++ values:
// every sparse feature of a batch of samples in one call, each a jagged list of ids per sample in
// its own table (TorchRec's KeyedJaggedTensor), answered as one row per sample with the pooled
// features side by side (its KeyedTensor) plus each unpooled feature's rows.
// EmbeddingClient::LookUpFeatures sends them. Thread-compatible values.
#ifndef EMB_CLIENT_FEATURES_H_
#define EMB_CLIENT_FEATURES_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "embedding/v1/embedding_service.pb.h"
#include "kernels/data_type.h"

namespace emb::client {

enum class Pooling : int;

// One feature: its table (empty: the default) and one bag of ids per sample, given by `lengths`
// (one per sample) or `offsets` (samples + 1), or neither for one id per sample. kNone answers a
// row per id; kSum and kMean a row per sample. `weights` (one per id) scale a kSum's rows.
struct FeatureSpec {
  std::string name;  // optional; echoed in the answer and in errors
  std::string table;
  std::vector<int64_t> ids;
  std::vector<int64_t> lengths;
  std::vector<int64_t> offsets;
  std::vector<float> weights;
  Pooling pooling{};
};

// The answer: `pooled` holds batch_size rows of pooled_width elements of `dtype`, each pooled
// feature's vector at its pooled_column; an unpooled feature's rows are in its `embeddings`
// ([ids, dim], row-major).
struct FeaturesResult {
  DataType dtype = DataType::kFloat32;
  int64_t batch_size = 0;
  int64_t pooled_width = 0;
  std::string pooled;
  struct Feature {
    std::string name;
    int64_t dim = 0;
    bool pooled = false;
    int64_t pooled_column = 0;
    std::string embeddings;
  };
  std::vector<Feature> features;  // in request order

  // Feature `f`'s vector for `sample` (pooled features), widened to float32.
  std::vector<float> PooledRow(size_t f, int64_t sample) const;
  // Row `row` of unpooled feature `f`, widened to float32.
  std::vector<float> Row(size_t f, int64_t row) const;
};

// Fills `out` from the arguments. Exposed for callers that drive the generated stub themselves.
void ToLookUpFeaturesRequest(int64_t batch_size, absl::Span<const FeatureSpec> features,
                             std::optional<DataType> dtype,
                             embedding::v1::LookUpFeaturesRequest* out);

// Converts a server answer, moving its bytes out. INTERNAL when it is malformed (an unknown or
// table-only dtype, byte counts that do not match batch_size, the widths and the dims).
absl::StatusOr<FeaturesResult> FromLookUpFeaturesResponse(
    embedding::v1::LookUpFeaturesResponse* response);

}  // namespace emb::client

#endif  // EMB_CLIENT_FEATURES_H_
