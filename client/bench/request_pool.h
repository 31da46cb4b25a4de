// The requests a load-generator run cycles through, made before the run starts: drawing ids on
// the request path would make the client the bottleneck for large requests.
#ifndef EMB_CLIENT_BENCH_REQUEST_POOL_H_
#define EMB_CLIENT_BENCH_REQUEST_POOL_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "client/bench/config.h"
#include "embedding/v1/embedding_service.pb.h"

namespace emb::client {

// How many requests of `ids_per_request` ids a pool holds: enough for at least 2^16 ids (16 to
// 4096 requests), at most 2^23 ids (at least 1 request).
int64_t RequestPoolSize(int64_t ids_per_request);

// The pool of a run on a table of `num_rows` rows, seeded with config.seed. Without call data:
// config.pool_requests (when 0, RequestPoolSize(ids_per_request)) requests of ids drawn from
// config.distribution over [0, num_rows). With config.call_data: its messages in turn, templates
// filled, as many as RequestPoolSize of the first filled message's ids asks for (a multiple of
// their number). config.table, when non-empty, and config.dtype, when set, are every request's.
// Errors: those of IdSampler::Create and FillCallData.
absl::StatusOr<std::vector<embedding::v1::LookUpRequest>> MakeRequestPool(const BenchConfig& config,
                                                                          int64_t num_rows);

}  // namespace emb::client

#endif  // EMB_CLIENT_BENCH_REQUEST_POOL_H_
