// answer_copy_benchmark: what the batcher's answer stage costs per caller for the copy of its
// rows, from the store's output into the memory gRPC sends, by how that memory is got:
//
//   BM_FreshString       std::string::assign into a fresh string (the answer path before the
//                        pool: a fresh multi-MiB allocation, page-faulted in as it is written)
//   BM_ZeroFilledString  std::string(n, '\0'), then memcpy: zero-fill plus a second write
//   BM_PooledBuffer      AnswerBufferPool::Acquire + memcpy (uninitialised, reused block)
//
// Arguments: answer bytes, answers in flight (each answer is released `inflight` answers later,
// as gRPC releases one while the next ones are being written). Run from the build directory:
//   service/batch/answer_copy_benchmark --benchmark_min_time=1
#include <sys/resource.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "service/batch/answer_buffer.h"

namespace emb::service {
namespace {

// The store's output: written once, read by every iteration (as a warm pinned or scratch buffer).
const std::byte* Source() {
  static auto* source = new std::vector<std::byte>(size_t{64} << 20, std::byte{0x3c});
  return source->data();
}

// Minor page faults of the process so far.
int64_t MinorFaults() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_minflt;
}

// Bytes per second, and page faults per answer since `faults_before`.
void SetCounters(benchmark::State& state, size_t bytes, int64_t faults_before) {
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(bytes));
  state.counters["faults"] = benchmark::Counter(static_cast<double>(MinorFaults() - faults_before),
                                                benchmark::Counter::kAvgIterations);
}

// Times answers of state.range(0) bytes made by `write(bytes)`, each kept "in flight" (as gRPC
// keeps an answer until it is sent) until state.range(1) newer ones are, then dropped.
template <typename Answer, typename Write>
void TimeAnswers(benchmark::State& state, Write write) {
  const auto bytes = static_cast<size_t>(state.range(0));
  const auto inflight = static_cast<size_t>(state.range(1));
  std::deque<Answer> sent;
  const int64_t faults = MinorFaults();
  for (auto _ : state) {
    Answer out = write(bytes);
    benchmark::DoNotOptimize(out.data());
    sent.push_back(std::move(out));
    if (sent.size() > inflight) {
      sent.pop_front();
    }
  }
  SetCounters(state, bytes, faults);
}

void BM_FreshString(benchmark::State& state) {
  const char* src = reinterpret_cast<const char*>(Source());
  TimeAnswers<std::string>(state, [src](size_t bytes) {
    std::string out;
    out.assign(src, bytes);
    return out;
  });
}

void BM_ZeroFilledString(benchmark::State& state) {
  const std::byte* src = Source();
  TimeAnswers<std::string>(state, [src](size_t bytes) {
    std::string out(bytes, '\0');
    std::memcpy(out.data(), src, bytes);
    return out;
  });
}

void BM_PooledBuffer(benchmark::State& state) {
  const std::byte* src = Source();
  AnswerBufferPool pool;
  TimeAnswers<AnswerBuffer>(state, [src, &pool](size_t bytes) {
    AnswerBuffer out = pool.Acquire(bytes);
    std::memcpy(out.data(), src, bytes);
    return out;
  });
}

// 256 x 768 and 2048 x 768 float32; 1 and 8 answers in flight.
void Sizes(benchmark::internal::Benchmark* b) {
  for (int64_t bytes : {int64_t{256} * 768 * 4, int64_t{2048} * 768 * 4}) {
    for (int64_t inflight : {1, 8}) {
      b->Args({bytes, inflight});
    }
  }
}

BENCHMARK(BM_FreshString)->Apply(Sizes)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_ZeroFilledString)->Apply(Sizes)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_PooledBuffer)->Apply(Sizes)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace emb::service

BENCHMARK_MAIN();
