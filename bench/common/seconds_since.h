// SecondsSince: the seconds from a steady-clock time point to now, for the benchmarks' timings.
#ifndef EMB_BENCH_COMMON_SECONDS_SINCE_H_
#define EMB_BENCH_COMMON_SECONDS_SINCE_H_

#include <chrono>

namespace emb::bench {

using Clock = std::chrono::steady_clock;

inline double SecondsSince(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

}  // namespace emb::bench

#endif  // EMB_BENCH_COMMON_SECONDS_SINCE_H_
