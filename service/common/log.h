// Minimal start-up and lifecycle logging to stderr: "2026-11-30T06:40:12.123456Z I message".
// Debian's Abseil has no absl/log. Thread-safe (one write per line).
#ifndef EMB_SERVICE_COMMON_LOG_H_
#define EMB_SERVICE_COMMON_LOG_H_

#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace emb::service {

// The time stamp that starts each line (absl::FormatTime / absl::ParseTime), in UTC.
inline constexpr char kLogTimeFormat[] = "%Y-%m-%dT%H:%M:%E6SZ";

template <typename... Args>
void Log(char severity, const Args&... args) {
  const std::string line =
      absl::StrCat(absl::FormatTime(kLogTimeFormat, absl::Now(), absl::UTCTimeZone()), " ",
                   std::string(1, severity), " ", args..., "\n");
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
}

template <typename... Args>
void LogInfo(const Args&... args) {
  Log('I', args...);
}

template <typename... Args>
void LogError(const Args&... args) {
  Log('E', args...);
}

}  // namespace emb::service

#endif  // EMB_SERVICE_COMMON_LOG_H_
