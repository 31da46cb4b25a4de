// libFuzzer target: request validation (service/rpc/request_validation.h), on any bytes parsed as a
// LookUpRequest (as the server parses a call), against tables a table file can describe (rows
// and dim >= 1, at most 2^63 - 1 bytes) and the default and extreme limits. An accepted request
// is servable: its shape holds its ids, its ids are rows of the table, a pooled one's bags cover
// its ids in order, and the answer fits the limits. A rejected one is INVALID_ARGUMENT or
// OUT_OF_RANGE with a metric reason.
#include <cstddef>
#include <cstdint>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "embedding/v1/embedding_service.pb.h"
#include "kernels/data_type.h"
#include "service/rpc/request_validation.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

using emb::DataType;
using emb::service::RequestTable;
using emb::service::RowRange;

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

void Check(const embedding::v1::LookUpRequest& request, const RequestTable& table,
           int64_t max_request_ids, int64_t max_response_bytes) {
  absl::string_view reason;
  const absl::StatusOr<emb::service::LookUpPlan> type =
      emb::service::PlanLookUp(request, table, max_request_ids, max_response_bytes, &reason);
  if (!type.ok()) {
    FUZZ_CHECK(type.status().code() == absl::StatusCode::kInvalidArgument ||
               type.status().code() == absl::StatusCode::kOutOfRange);
    FUZZ_CHECK(!reason.empty());
    FUZZ_CHECK(!type.status().message().empty());
    return;
  }
  const int64_t n = request.ids_size();
  if (request.shape_size() > 0) {
    __int128 product = 1;
    for (int64_t d : request.shape()) {
      FUZZ_CHECK(d >= 0);
      product *= d;
      FUZZ_CHECK(product <= kMax);
    }
    FUZZ_CHECK(product == n);
  }
  FUZZ_CHECK(n <= max_request_ids);
  for (int64_t id : request.ids()) {
    FUZZ_CHECK(table.ids.Contains(id));
  }
  FUZZ_CHECK(emb::IsValueType(type->out_type));
  FUZZ_CHECK(type->answer_rows <= max_request_ids);
  FUZZ_CHECK(static_cast<__int128>(type->answer_rows) * table.dim *
                 emb::ElementSize(type->out_type) <=
             max_response_bytes);
  // The answer's shape holds its rows; a pooled request's bags run over its ids in order.
  __int128 rows = 1;
  for (size_t i = 0; i + 1 < type->shape.size(); ++i) {
    rows *= type->shape[i];
  }
  FUZZ_CHECK(rows == type->answer_rows && type->shape.back() == table.dim);
  if (type->pooled) {
    FUZZ_CHECK(static_cast<int64_t>(type->offsets.size()) == type->answer_rows + 1);
    FUZZ_CHECK(type->offsets.front() == 0 && type->offsets.back() == n);
    for (size_t b = 1; b < type->offsets.size(); ++b) {
      FUZZ_CHECK(type->offsets[b] >= type->offsets[b - 1]);
    }
    FUZZ_CHECK(request.weights_size() == 0 || request.weights_size() == n);
  } else {
    FUZZ_CHECK(type->answer_rows == n);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  embedding::v1::LookUpRequest request;
  if (!request.ParseFromArray(data, static_cast<int>(size))) {
    return 0;  // the server answers INVALID_ARGUMENT before validation
  }
  // Tables a header check accepts, from a typical one to the largest dims and rows, and a shard.
  const RequestTable tables[] = {
      {"demo", RowRange::Whole(100000), 128, DataType::kFloat32},
      {"one", RowRange::Whole(1), 1, DataType::kBFloat16},
      {"wide", RowRange::Whole(1), int64_t{1} << 60, DataType::kFloat32},
      {"tall", RowRange::Whole(kMax / 2), 1, DataType::kFloat16},
      {"shard", RowRange(668, 333, 1001), 8, DataType::kFloat32, 2, 3},
  };
  for (const RequestTable& table : tables) {
    Check(request, table, 65536, int64_t{128} << 20);  // the server's defaults
    // The largest limits: any answer size, and ids (or rows) per request up to 2^20. The server
    // refuses --max_request_ids above --max_batch_ids, whose ids and rows every GPU slot
    // allocates, so a limit near 2^63 never starts; validation may allocate a pooled request's
    // offsets (rows + 1, from its shape) up to the limit, which a near-2^63 limit would not bound.
    Check(request, table, int64_t{1} << 20, kMax);
  }
  return 0;
}
