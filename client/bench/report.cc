#include "client/bench/report.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace emb::client {
namespace {

std::string JsonString(absl::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(c);
    } else if (static_cast<unsigned char>(c) < 0x20) {
      absl::StrAppendFormat(&out, "\\u%04x", c);
    } else {
      out.push_back(c);
    }
  }
  out.push_back('"');
  return out;
}

double Micros(absl::Duration d) { return absl::ToDoubleMicroseconds(d); }

}  // namespace

std::string FormatBenchJson(const BenchReport& r) {
  std::string codes;
  for (const auto& [name, n] : r.codes) {
    absl::StrAppend(&codes, codes.empty() ? "" : ",", JsonString(name), ":", n);
  }
  std::string first_messages;
  for (const auto& [name, message] : r.first_messages) {
    absl::StrAppend(&first_messages, first_messages.empty() ? "" : ",", JsonString(name), ":",
                    JsonString(message));
  }
  const LatencySummary& l = r.latency;
  return absl::StrFormat(
      "{\"requests\":%d,\"duration_s\":%.6f,\"rps\":%.3f,\"ids_per_s\":%.3f,"
      "\"payload_mb_per_s\":%.6f,\"latency_us\":{\"p50\":%.3f,\"p90\":%.3f,\"p99\":%.3f,"
      "\"p999\":%.3f,\"max\":%.3f,\"mean\":%.3f},\"ok_latency_us\":{\"p50\":%.3f,"
      "\"p99\":%.3f,\"max\":%.3f},\"unsent\":%d,\"codes\":{%s},\"first_messages\":{%s},"
      "\"table\":%s,\"rows\":%d,\"dim\":%d}",
      r.requests, r.duration_s, r.rps(), r.ids_per_s(), r.payload_mb_per_s(), Micros(l.p50),
      Micros(l.p90), Micros(l.p99), Micros(l.p999), Micros(l.max), Micros(l.mean),
      Micros(r.ok_latency.p50), Micros(r.ok_latency.p99), Micros(r.ok_latency.max), r.unsent, codes,
      first_messages, JsonString(r.table), r.rows, r.dim);
}

std::string FormatBenchText(const BenchConfig& c, const BenchReport& r) {
  std::string out;
  if (c.call_data.empty()) {
    absl::StrAppendFormat(
        &out, "target        %s, table \"%s\" (%d x %d), %d ids/request, %s ids\n", c.target,
        r.table, r.rows, r.dim, c.ids_per_request,
        c.distribution == IdDistribution::kZipf ? absl::StrFormat("zipf(%g)", c.zipf_exponent)
                                                : std::string("uniform"));
  } else {
    absl::StrAppendFormat(&out,
                          "target        %s, table \"%s\" (%d x %d), requests from ghz data\n",
                          c.target, r.table, r.rows, r.dim);
  }
  if (c.rps > 0) {
    absl::StrAppendFormat(&out, "load          open loop at %g req/s (at most %d in flight), ",
                          c.rps, c.max_inflight);
  } else {
    absl::StrAppendFormat(&out, "load          closed loop, concurrency %d, ", c.concurrency);
  }
  absl::StrAppendFormat(&out, "%d connection(s), warmup %s\n", c.connections,
                        absl::FormatDuration(c.warmup));
  const LatencySummary& l = r.latency;
  absl::StrAppendFormat(&out, "requests      %d in %.3f s\n", r.requests, r.duration_s);
  absl::StrAppendFormat(&out, "req/s         %.1f\n", r.rps());
  absl::StrAppendFormat(&out, "ids/s         %.1f\n", r.ids_per_s());
  absl::StrAppendFormat(&out, "payload MB/s  %.2f\n", r.payload_mb_per_s());
  absl::StrAppendFormat(&out,
                        "latency us    p50 %.1f  p90 %.1f  p99 %.1f  p99.9 %.1f  max %.1f  "
                        "mean %.1f\n",
                        Micros(l.p50), Micros(l.p90), Micros(l.p99), Micros(l.p999), Micros(l.max),
                        Micros(l.mean));
  if (r.ok_latency.count != r.latency.count) {
    absl::StrAppendFormat(
        &out, "OK calls, us  p50 %.1f  p90 %.1f  p99 %.1f  p99.9 %.1f  max %.1f\n",
        Micros(r.ok_latency.p50), Micros(r.ok_latency.p90), Micros(r.ok_latency.p99),
        Micros(r.ok_latency.p999), Micros(r.ok_latency.max));
  }
  if (r.unsent > 0) {
    absl::StrAppendFormat(&out, "not sent      %d (the generator fell behind its rate)\n",
                          r.unsent);
  }
  absl::StrAppend(&out, "codes        ");
  for (const auto& [name, n] : r.codes) {
    absl::StrAppend(&out, " ", name, " ", n);
  }
  absl::StrAppend(&out, "\n");
  for (const auto& [name, message] : r.first_messages) {
    absl::StrAppend(&out, "  ", name, ": ", message.empty() ? "(no message)" : message, "\n");
  }
  return out;
}

}  // namespace emb::client
