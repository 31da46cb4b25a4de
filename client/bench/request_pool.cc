#include "client/bench/request_pool.h"

#include <algorithm>
#include <utility>

#include "client/bench/call_data.h"
#include "client/bench/id_sampler.h"
#include "proto/convert/data_type_proto.h"

namespace emb::client {

namespace pb = ::embedding::v1;

int64_t RequestPoolSize(int64_t ids) {
  ids = std::max<int64_t>(ids, 1);
  int64_t pool_size = std::clamp<int64_t>(((int64_t{1} << 16) + ids - 1) / ids, 16, 4096);
  return std::clamp<int64_t>(std::min(pool_size, (int64_t{1} << 23) / ids), 1, 4096);
}

absl::StatusOr<std::vector<pb::LookUpRequest>> MakeRequestPool(const BenchConfig& config,
                                                               int64_t num_rows) {
  BenchRng rng(config.seed);
  const pb::DataType dtype = ToProto(config.dtype);
  std::vector<pb::LookUpRequest> pool;
  if (!config.call_data.empty()) {
    std::vector<CallTemplate> templates;
    for (const std::string& json : config.call_data) {
      absl::StatusOr<CallTemplate> t = CallTemplate::Parse(json);
      if (!t.ok()) {
        return t.status();
      }
      templates.push_back(*std::move(t));
    }
    int64_t size = static_cast<int64_t>(templates.size());
    for (int64_t i = 0; i < size; ++i) {
      absl::StatusOr<std::string> filled = templates[i % templates.size()].Fill(rng);
      if (!filled.ok()) {
        return filled.status();
      }
      absl::StatusOr<pb::LookUpRequest> request = ParseLookUpRequestJson(*filled);
      if (!request.ok()) {
        return request.status();
      }
      if (!config.table.empty()) {
        request->set_table(config.table);
      }
      if (config.dtype.has_value()) {
        request->set_dtype(dtype);
      }
      if (i == 0) {
        const int64_t n = static_cast<int64_t>(templates.size());
        size = (RequestPoolSize(request->ids_size()) + n - 1) / n * n;
        pool.reserve(size);
      }
      pool.push_back(*std::move(request));
    }
    return pool;
  }

  absl::StatusOr<IdSampler> sampler =
      IdSampler::Create(config.distribution, num_rows, config.zipf_exponent);
  if (!sampler.ok()) {
    return sampler.status();
  }
  const int64_t ids = config.ids_per_request;
  pool.resize(config.pool_requests > 0 ? config.pool_requests : RequestPoolSize(ids));
  for (pb::LookUpRequest& request : pool) {
    request.set_table(config.table);
    request.set_dtype(dtype);
    request.mutable_ids()->Reserve(static_cast<int>(ids));
    for (int64_t i = 0; i < ids; ++i) {
      request.add_ids(sampler->Sample(rng));
    }
  }
  return pool;
}

}  // namespace emb::client
