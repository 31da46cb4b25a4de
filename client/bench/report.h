// What a load-generator run measured, and its two renderings: one JSON line for machines, a few
// lines of text for people.
#ifndef EMB_CLIENT_BENCH_REPORT_H_
#define EMB_CLIENT_BENCH_REPORT_H_

#include <cstdint>
#include <map>
#include <string>

#include "client/bench/config.h"
#include "client/bench/latency_stats.h"

namespace emb::client {

struct BenchReport {
  // The table the run used, from ListTables.
  std::string table;
  int64_t rows = 0;
  int64_t dim = 0;
  // Calls started in the measured phase, whatever their status.
  int64_t requests = 0;
  // From the start of the measured phase to the last of its calls' completions.
  double duration_s = 0;
  // Ids and answer bytes of the calls that returned OK.
  int64_t ok_ids = 0;
  int64_t payload_bytes = 0;
  // Over every measured call.
  LatencySummary latency;
  // Over the measured calls that returned OK, each from when it was sent (under overload the
  // refused calls are fast, and an open-loop generator may fall behind its rate).
  LatencySummary ok_latency;
  // Open loop: calls that fell due but were not sent by the end, the generator being behind.
  int64_t unsent = 0;
  // Calls per final status, keyed by the google.rpc.Code name ("OK", "UNAVAILABLE", ...).
  std::map<std::string, int64_t> codes;
  // For each code of `codes` but OK, the message of one call that ended with it (the first that
  // a slot saw), as ghz shows them: "id 100000 out of range ...".
  std::map<std::string, std::string> first_messages;

  double rps() const { return PerSecond(requests); }
  double ids_per_s() const { return PerSecond(ok_ids); }
  // Megabytes of 10^6 bytes.
  double payload_mb_per_s() const { return PerSecond(payload_bytes) / 1e6; }
  double PerSecond(int64_t n) const {
    return duration_s > 0 ? static_cast<double>(n) / duration_s : 0;
  }
};

// One JSON object on one line: requests, duration_s, rps, ids_per_s, payload_mb_per_s,
// latency_us {p50, p90, p99, p999, max, mean}, codes {"OK": n, ...}, first_messages {"CODE":
// "message", ...} (the codes but OK), and table, rows, dim.
std::string FormatBenchJson(const BenchReport& report);
// A few lines for people.
std::string FormatBenchText(const BenchConfig& config, const BenchReport& report);

}  // namespace emb::client

#endif  // EMB_CLIENT_BENCH_REPORT_H_
