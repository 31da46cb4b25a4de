#include "service/metrics/scrape_time_metrics.h"

#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"

namespace emb::service {
namespace {

// What /proc/self/stat says: CPU time, memory and the start time (since boot).
struct ProcStat {
  double cpu_seconds = 0;
  double virtual_bytes = 0;
  double resident_bytes = 0;
  double start_seconds_after_boot = 0;
};

std::optional<ProcStat> ReadProcStat() {
  std::ifstream file("/proc/self/stat");
  std::string line;
  if (!std::getline(file, line)) {
    return std::nullopt;
  }
  // The command name (field 2) may hold spaces; the fields after its closing ')' are plain.
  const size_t close = line.rfind(')');
  if (close == std::string::npos) {
    return std::nullopt;
  }
  const std::vector<absl::string_view> f =
      absl::StrSplit(absl::string_view(line).substr(close + 2), ' ');
  // Field 3 (state) is f[0]: utime 14, stime 15, starttime 22, vsize 23, rss 24.
  if (f.size() < 22) {
    return std::nullopt;
  }
  double utime = 0, stime = 0, start = 0, vsize = 0, rss = 0;
  if (!absl::SimpleAtod(f[11], &utime) || !absl::SimpleAtod(f[12], &stime) ||
      !absl::SimpleAtod(f[19], &start) || !absl::SimpleAtod(f[20], &vsize) ||
      !absl::SimpleAtod(f[21], &rss)) {
    return std::nullopt;
  }
  const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  const double page = static_cast<double>(sysconf(_SC_PAGESIZE));
  return ProcStat{(utime + stime) / ticks, vsize, rss * page, start / ticks};
}

// The boot time in seconds since the epoch (/proc/stat's btime).
std::optional<double> BootTime() {
  std::ifstream file("/proc/stat");
  std::string line;
  while (std::getline(file, line)) {
    absl::string_view rest = line;
    double btime = 0;
    if (absl::ConsumePrefix(&rest, "btime ") && absl::SimpleAtod(rest, &btime)) {
      return btime;
    }
  }
  return std::nullopt;
}

std::optional<double> OpenFds() {
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) {
    return std::nullopt;
  }
  double count = -1;  // the directory's own descriptor is listed too
  while (dirent* e = readdir(dir)) {
    if (e->d_name[0] != '.') {
      ++count;
    }
  }
  closedir(dir);
  return count;
}

prometheus::MetricFamily Family(const std::string& name, const std::string& help,
                                prometheus::MetricType type, double value) {
  prometheus::ClientMetric m;
  if (type == prometheus::MetricType::Counter) {
    m.counter.value = value;
  } else {
    m.gauge.value = value;
  }
  return prometheus::MetricFamily{name, help, type, {m}};
}

}  // namespace

ScrapeTimeMetrics::ScrapeTimeMetrics() = default;

prometheus::ClientMetric& ScrapeTimeMetrics::AddSample(std::vector<prometheus::MetricFamily>& out,
                                                       const std::string& name,
                                                       const std::string& help,
                                                       prometheus::MetricType type,
                                                       const prometheus::Labels& labels) {
  prometheus::MetricFamily* family = nullptr;
  for (prometheus::MetricFamily& f : out) {
    if (f.name == name) {
      family = &f;
    }
  }
  if (family == nullptr) {
    out.push_back(prometheus::MetricFamily{name, help, type, {}});
    family = &out.back();
  }
  prometheus::ClientMetric m;
  for (const auto& [label, value] : labels) {
    m.label.push_back({label, value});
  }
  family->metric.push_back(std::move(m));
  return family->metric.back();
}

void ScrapeTimeMetrics::AddGroup(std::vector<GroupSample> samples, prometheus::Labels labels,
                                 ReadGroup read) {
  absl::MutexLock lock(&mu_);
  const size_t n = samples.size();
  groups_.push_back(
      Group{std::move(samples), std::move(labels), std::move(read), std::vector<double>(n, 0.0)});
}

void ScrapeTimeMetrics::AddGauge(const std::string& name, const std::string& help,
                                 prometheus::Labels labels, Read read) {
  gauges_.push_back(Sample{name, help, std::move(labels), std::move(read)});
}

std::vector<prometheus::MetricFamily> ScrapeTimeMetrics::Collect() const {
  using prometheus::MetricType;
  std::vector<prometheus::MetricFamily> out;
  if (std::optional<ProcStat> stat = ReadProcStat()) {
    out.push_back(Family("process_cpu_seconds_total", "User and system CPU time, in seconds.",
                         MetricType::Counter, stat->cpu_seconds));
    out.push_back(Family("process_resident_memory_bytes", "Resident memory size in bytes.",
                         MetricType::Gauge, stat->resident_bytes));
    out.push_back(Family("process_virtual_memory_bytes", "Virtual memory size in bytes.",
                         MetricType::Gauge, stat->virtual_bytes));
    if (std::optional<double> boot = BootTime()) {
      out.push_back(Family("process_start_time_seconds",
                           "Start time of the process since the Unix epoch, in seconds.",
                           MetricType::Gauge, *boot + stat->start_seconds_after_boot));
    }
  }
  if (std::optional<double> fds = OpenFds()) {
    out.push_back(Family("process_open_fds", "Open file descriptors.", MetricType::Gauge, *fds));
  }
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0) {
    out.push_back(Family("process_max_fds", "The soft limit on open file descriptors.",
                         MetricType::Gauge, static_cast<double>(limit.rlim_cur)));
  }
  for (const Sample& s : gauges_) {
    std::optional<double> value = s.read();
    if (!value.has_value()) {
      continue;
    }
    AddSample(out, s.name, s.help, MetricType::Gauge, s.labels).gauge.value = *value;
  }
  absl::MutexLock lock(&mu_);
  for (Group& g : groups_) {
    const std::optional<std::vector<double>> values = g.read();
    if (!values.has_value() || values->size() != g.samples.size()) {
      continue;
    }
    for (size_t i = 0; i < g.samples.size(); ++i) {
      const GroupSample& s = g.samples[i];
      prometheus::ClientMetric& m = AddSample(out, s.name, s.help, s.type, g.labels);
      if (s.type == MetricType::Counter) {
        g.highest[i] = std::max(g.highest[i], (*values)[i]);
        m.counter.value = g.highest[i];
      } else {
        m.gauge.value = (*values)[i];
      }
    }
  }
  return out;
}

}  // namespace emb::service
