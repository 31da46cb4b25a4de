// A closed-loop load of LookUp calls against one server (--whole=TARGET) or a table sharded over
// servers (--shards=T0,T1,...; ShardedClient), for bench/sharded/sharded_benchmark.py. Prints
// one JSON object: calls, seconds, p50_ms, p99_ms, and for shards the client's own work per call
// (splitting the ids, placing the rows), timed alone without RPCs on the same requests.
//
//   sharded_load (--whole=T | --shards=T0,T1,T2) [--batch=4096] [--concurrency=16]
//                [--seconds=5] [--warmup_seconds=1] [--requests=64] [--seed=1]
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "bench/common/bench_flags.h"
#include "client/embedding_client.h"
#include "client/sharded_client.h"

namespace emb::client {
namespace {

using Clock = std::chrono::steady_clock;

double Percentile(std::vector<double> v, double q) {
  if (v.empty()) {
    return 0;
  }
  const auto k = static_cast<size_t>(q * static_cast<double>(v.size() - 1));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  return v[k];
}

int Run(int argc, char** argv) {
  bench::Flags flags(argc, argv);
  const std::string whole = flags.Get("whole", "");
  const std::string shards_flag = flags.Get("shards", "");
  const int64_t batch = flags.Int("batch", 4096, 1);
  const int64_t concurrency = flags.Int("concurrency", 16, 1);
  const int64_t seconds = flags.Int("seconds", 5, 1);
  const int64_t warmup = flags.Int("warmup_seconds", 1, 1);
  const int64_t requests = flags.Int("requests", 64, 1);
  const int64_t seed = flags.Int("seed", 1, 1);
  if (!flags.status().ok()) {
    std::fprintf(stderr, "sharded_load: %s\n", flags.status().ToString().c_str());
    return 2;
  }
  if (whole.empty() == shards_flag.empty()) {
    std::fprintf(stderr, "sharded_load: give --whole or --shards\n");
    return 2;
  }
  const absl::Duration timeout = absl::Seconds(30);

  // The table's rows, and the calls: one LookUp each, round robin.
  std::unique_ptr<EmbeddingClient> one;
  std::unique_ptr<ShardedClient> sharded;
  int64_t rows = 0;
  int64_t dim = 0;
  std::optional<ShardLayout> layout;
  if (!whole.empty()) {
    one = EmbeddingClient::Connect(whole);
    auto tables = one->ListTables(timeout);
    if (!tables.ok()) {
      std::fprintf(stderr, "sharded_load: %s\n", tables.status().ToString().c_str());
      return 1;
    }
    rows = tables->front().rows;
    dim = tables->front().dim;
  } else {
    auto client = ShardedClient::Connect(absl::StrSplit(shards_flag, ','));
    absl::StatusOr<ShardLayout> l = client.ok() ? (*client)->Layout("", timeout) : client.status();
    if (!l.ok()) {
      std::fprintf(stderr, "sharded_load: %s\n", l.status().ToString().c_str());
      return 1;
    }
    sharded = *std::move(client);
    layout = *l;
    rows = l->whole_rows;
    dim = l->dim;
  }
  std::mt19937_64 rng(static_cast<uint64_t>(seed));
  std::vector<LookUpRequestSpec> specs(static_cast<size_t>(requests));
  for (LookUpRequestSpec& s : specs) {
    for (int64_t i = 0; i < batch; ++i) {
      s.ids.push_back(static_cast<int64_t>(rng() % static_cast<uint64_t>(rows)));
    }
  }

  // The closed loop: `concurrency` threads, each one call at a time.
  std::atomic<bool> measuring{false};
  std::atomic<bool> stop{false};
  std::atomic<int64_t> failed{0};
  absl::Mutex mu;
  std::vector<double> latencies_ms;
  std::vector<std::thread> threads;
  for (int64_t t = 0; t < concurrency; ++t) {
    threads.emplace_back([&, t] {
      std::vector<double> mine;
      for (size_t i = static_cast<size_t>(t); !stop.load(); i += static_cast<size_t>(concurrency)) {
        const LookUpRequestSpec& spec = specs[i % specs.size()];
        const Clock::time_point start = Clock::now();
        const absl::StatusOr<LookUpResult> r =
            one != nullptr ? one->LookUp(spec, timeout) : sharded->LookUp(spec, timeout);
        const double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
        if (!r.ok()) {
          failed.fetch_add(1);
          std::fprintf(stderr, "sharded_load: %s\n", r.status().ToString().c_str());
        }
        if (measuring.load()) {
          mine.push_back(ms);
        }
      }
      absl::MutexLock lock(&mu);
      latencies_ms.insert(latencies_ms.end(), mine.begin(), mine.end());
    });
  }
  std::this_thread::sleep_for(std::chrono::seconds(warmup));
  measuring = true;
  const Clock::time_point start = Clock::now();
  std::this_thread::sleep_for(std::chrono::seconds(seconds));
  measuring = false;
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  stop = true;
  for (std::thread& t : threads) {
    t.join();
  }

  // The client's own work per call, without RPCs: split, and place every shard's rows.
  double split_us = 0;
  double place_us = 0;
  if (layout.has_value()) {
    const size_t row_bytes = static_cast<size_t>(dim) * sizeof(float);
    std::string answer(static_cast<size_t>(batch) * row_bytes, '\0');
    const std::string rows_in(static_cast<size_t>(batch) * row_bytes, '\1');
    for (const LookUpRequestSpec& spec : specs) {
      const Clock::time_point a = Clock::now();
      absl::StatusOr<ShardSplit> split = SplitIds(spec.ids, *layout);
      const Clock::time_point b = Clock::now();
      for (const auto& positions : split->positions) {
        PlaceRows(absl::string_view(rows_in).substr(0, positions.size() * row_bytes), positions,
                  row_bytes, &answer);
      }
      const Clock::time_point c = Clock::now();
      split_us += std::chrono::duration<double, std::micro>(b - a).count();
      place_us += std::chrono::duration<double, std::micro>(c - b).count();
    }
    split_us /= static_cast<double>(specs.size());
    place_us /= static_cast<double>(specs.size());
  }
  std::printf(
      "{\"calls\": %zu, \"failed\": %lld, \"seconds\": %.3f, \"p50_ms\": %.3f, \"p99_ms\": %.3f, "
      "\"split_us\": %.2f, \"place_us\": %.2f, \"batch\": %lld, \"dim\": %lld}\n",
      latencies_ms.size(), static_cast<long long>(failed.load()), elapsed,
      Percentile(latencies_ms, 0.5), Percentile(latencies_ms, 0.99), split_us, place_us,
      static_cast<long long>(batch), static_cast<long long>(dim));
  return failed.load() == 0 ? 0 : 3;
}

}  // namespace
}  // namespace emb::client

int main(int argc, char** argv) { return emb::client::Run(argc, argv); }
