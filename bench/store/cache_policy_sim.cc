// cache_policy_sim: the host tier's cache policy (RowCachePolicy) offline, on the CPU, under
// host_tier_benchmark's power law: a warm-up of --warmup_batches batches of --batch ids, of which
// the manager is handed --samples_per_batch (evenly spaced, as HostTier::BeginBatch hands them),
// each followed by one Plan of --max_changes rows; then the hit rate on --measured_batches fresh
// batches beside the ideal static cache's (the hottest rows). The warm-up batches are drawn fresh,
// or with --pool_batches=N from a pool of N batches replayed (host_tier_benchmark's old method).
// No GPU, no timing: how many ids counted, and which warm-up, the policy needs (docs/benchmarks.md
// section 14).
//
//   cache_policy_sim [--rows=33554432] [--cache_percent=10] [--exponent=1.05] [--batch=65536]
//                    [--warmup_batches=10000] [--samples_per_batch=16384] [--pool_batches=0]
//                    [--max_changes=16384] [--measured_batches=60]
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "bench/common/bench_flags.h"
#include "bench/common/power_law.h"
#include "service/store/cache/row_cache_policy.h"

namespace emb::service {
namespace {

int Run(int argc, char** argv) {
  bench::Flags flags(argc, argv);
  const int64_t rows = flags.Int("rows", 33554432, 1);
  const int64_t cache_percent = flags.Int("cache_percent", 10, 1);
  const double exponent = flags.Double("exponent", 1.05, 0);
  const int64_t batch = flags.Int("batch", 65536, 1);
  const int64_t warmup_batches = flags.Int("warmup_batches", 10000, 0);
  const int64_t samples_per_batch = flags.Int("samples_per_batch", 16384, 1);
  const int64_t pool_batches = flags.Int("pool_batches", 0, 0);
  const int64_t max_changes = flags.Int("max_changes", 16384, 1);
  const int64_t measured_batches = flags.Int("measured_batches", 60, 1);
  if (!flags.status().ok() || exponent == 1.0) {
    std::fprintf(
        stderr, "cache_policy_sim: %s\n",
        flags.status().ok() ? "--exponent 1 is not supported" : flags.status().ToString().c_str());
    return 2;
  }
  const int64_t capacity = rows * cache_percent / 100;

  // Ranks of host_tier_benchmark's power law, before it scatters them (the policy cannot tell a
  // rank from a row).
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  const bench::PowerLaw law(rows, exponent);
  auto draw = [&] { return law.Rank(u(rng)); };
  std::vector<int64_t> pool(static_cast<size_t>(pool_batches * batch));
  for (int64_t& id : pool) {
    id = draw();
  }

  RowCachePolicy::Options options;
  options.rows = rows;
  options.capacity = capacity;
  RowCachePolicy policy(options);
  const int64_t stride = std::max<int64_t>(1, batch / samples_per_batch);
  std::vector<int64_t> samples;
  for (int64_t b = 0; b < warmup_batches; ++b) {
    samples.clear();
    const auto ticket = static_cast<uint64_t>(b);
    const auto first = static_cast<int64_t>(((ticket * 0x9e3779b97f4a7c15ull) >> 40) %
                                            static_cast<uint64_t>(stride));
    for (int64_t i = first; i < batch; i += stride) {
      samples.push_back(pool_batches > 0 ? pool[static_cast<size_t>((b % pool_batches) * batch + i)]
                                         : draw());
    }
    policy.Record(samples);
    policy.Plan(static_cast<size_t>(max_changes));
  }

  int64_t hits = 0;
  int64_t ideal = 0;
  const int64_t n = measured_batches * batch;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t id = draw();
    hits += policy.slot_of(id) >= 0 ? 1 : 0;
    ideal += id < capacity ? 1 : 0;
  }
  const std::string warmup =
      pool_batches > 0 ? "a pool of " + std::to_string(pool_batches) + " batches" : "fresh batches";
  std::printf(
      "| exponent | warm-up | ids counted a batch | hit rate | ideal static cache | of the ideal "
      "|\n"
      "| ---: | --- | ---: | ---: | ---: | ---: |\n"
      "| %.2f | %lld batches, on %s | %lld | %.4f | %.4f | %.3f |\n",
      exponent, static_cast<long long>(warmup_batches), warmup.c_str(),
      static_cast<long long>(samples_per_batch), static_cast<double>(hits) / static_cast<double>(n),
      static_cast<double>(ideal) / static_cast<double>(n),
      static_cast<double>(hits) / static_cast<double>(ideal));
  return 0;
}

}  // namespace
}  // namespace emb::service

int main(int argc, char** argv) { return emb::service::Run(argc, argv); }
