#include "client/bench.h"

#include <grpcpp/client_context.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "client/embedding_client.h"
#include "embedding/v1/embedding_service.grpc.pb.h"

namespace emb::client {
namespace {

namespace pb = ::embedding::v1;

// log1p(x) / x, accurate near 0.
double Helper1(double x) {
  if (std::abs(x) > 1e-8) {
    return std::log1p(x) / x;
  }
  return 1 - x * (0.5 - x * (1.0 / 3.0 - 0.25 * x));
}

// expm1(x) / x, accurate near 0.
double Helper2(double x) {
  if (std::abs(x) > 1e-8) {
    return std::expm1(x) / x;
  }
  return 1 + x * 0.5 * (1 + x * (1.0 / 3.0) * (1 + 0.25 * x));
}

// Monotonic nanoseconds.
int64_t NowNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

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

// What the measured calls of one worker or shard add up to.
struct Stats {
  LatencyRecorder latencies;
  LatencyRecorder ok_latencies;
  std::map<int, int64_t> codes;  // by grpc::StatusCode
  int64_t ok_ids = 0;
  int64_t payload_bytes = 0;
  int64_t last_done_ns = std::numeric_limits<int64_t>::min();

  // `latency` runs from the call's due time (open loop) or start; `sent_latency`, from when it
  // was sent: the two differ when an open-loop generator falls behind its rate.
  void Add(absl::Duration latency, absl::Duration sent_latency, int64_t done_ns,
           const grpc::Status& status, const pb::LookUpResponse& response, int64_t num_ids) {
    latencies.Record(latency);
    ++codes[status.error_code()];
    if (status.ok()) {
      ok_latencies.Record(sent_latency);
      ok_ids += num_ids;
      payload_bytes += static_cast<int64_t>(response.embeddings().size());
    }
    last_done_ns = std::max(last_done_ns, done_ns);
  }

  void Merge(const Stats& other) {
    latencies.Merge(other.latencies);
    ok_latencies.Merge(other.ok_latencies);
    for (const auto& [code, n] : other.codes) {
      codes[code] += n;
    }
    ok_ids += other.ok_ids;
    payload_bytes += other.payload_bytes;
    last_done_ns = std::max(last_done_ns, other.last_done_ns);
  }
};

// Runs `start` now unless a call to RunTrampolined is already on this thread's stack, in which
// case that outer call runs it after `start`'s caller returns. gRPC may run a completion callback
// inline inside the call that started the RPC (a fast failure), and a closed-loop worker starts
// its next call from the callback; this keeps the stack flat.
thread_local std::vector<absl::AnyInvocable<void()>>* tl_pending = nullptr;

void RunTrampolined(absl::AnyInvocable<void()> start) {
  if (tl_pending != nullptr) {
    tl_pending->push_back(std::move(start));
    return;
  }
  std::vector<absl::AnyInvocable<void()>> pending;
  pending.push_back(std::move(start));
  tl_pending = &pending;
  while (!pending.empty()) {
    absl::AnyInvocable<void()> next = std::move(pending.back());
    pending.pop_back();
    next();
  }
  tl_pending = nullptr;
}

// Everything one run shares; lives on RunBench's stack until every call has completed.
struct RunState {
  const BenchConfig* config = nullptr;
  std::vector<std::unique_ptr<pb::EmbeddingService::Stub>> stubs;
  std::vector<pb::LookUpRequest> pool;
  int64_t measure_start_ns = 0;
  int64_t stop_ns = 0;  // calls start before this; INT64_MAX in --requests mode
  std::atomic<int64_t> next_seq{0};
  int64_t unsent = 0;  // open loop: calls due but not sent by stop_ns (the generator was behind)
  std::atomic<int64_t> measured_issued{0};

  const pb::LookUpRequest& RequestFor(int64_t seq) const { return pool[seq % pool.size()]; }

  // A closed-loop slot about to start a call at `now`: false when the run is over for it (past
  // the stop time, or the measured calls are all issued); else whether the call is measured.
  bool MayStart(int64_t now, bool* measured) {
    if (now >= stop_ns) {
      return false;
    }
    *measured = now >= measure_start_ns;
    return !(*measured && config->requests > 0 &&
             measured_issued.fetch_add(1, std::memory_order_relaxed) >= config->requests);
  }

  void SetDeadline(grpc::ClientContext* ctx) const {
    ctx->set_deadline(absl::ToChronoTime(absl::Now() + config->timeout));
  }
};

// One closed-loop slot: starts a call, and from its completion the next one, until the run ends.
class Worker {
 public:
  Worker(RunState* run, int index, std::atomic<int>* active, absl::Notification* all_done)
      : run_(run),
        stub_(run->stubs[index % run->stubs.size()].get()),
        active_(active),
        all_done_(all_done) {}

  void Start() {
    RunTrampolined([this] { StartCall(); });
  }
  const Stats& stats() const { return stats_; }

 private:
  void StartCall() {
    const int64_t now = NowNanos();
    if (!run_->MayStart(now, &measured_)) {
      Finish();
      return;
    }
    request_ = &run_->RequestFor(run_->next_seq.fetch_add(1, std::memory_order_relaxed));
    ctx_ = std::make_unique<grpc::ClientContext>();
    run_->SetDeadline(ctx_.get());
    response_.Clear();
    start_ns_ = now;
    stub_->async()->LookUp(ctx_.get(), request_, &response_,
                           [this](const grpc::Status& s) { OnDone(s); });
  }

  void OnDone(const grpc::Status& status) {
    const int64_t done = NowNanos();
    if (measured_) {
      stats_.Add(absl::Nanoseconds(done - start_ns_), absl::Nanoseconds(done - start_ns_), done,
                 status, response_, request_->ids_size());
    }
    RunTrampolined([this] { StartCall(); });
  }

  void Finish() {
    if (active_->fetch_sub(1, std::memory_order_acq_rel) == 1) {
      all_done_->Notify();
    }
  }

  RunState* const run_;
  pb::EmbeddingService::Stub* const stub_;
  std::atomic<int>* const active_;
  absl::Notification* const all_done_;
  // Touched only by this worker's call chain, one call at a time.
  std::unique_ptr<grpc::ClientContext> ctx_;
  const pb::LookUpRequest* request_ = nullptr;
  pb::LookUpResponse response_;
  int64_t start_ns_ = 0;
  bool measured_ = false;
  Stats stats_;
};

Stats RunClosedLoop(RunState* run) {
  const int n = run->config->concurrency;
  std::atomic<int> active{n};
  absl::Notification all_done;
  std::vector<std::unique_ptr<Worker>> workers;
  workers.reserve(n);
  for (int i = 0; i < n; ++i) {
    workers.push_back(std::make_unique<Worker>(run, i, &active, &all_done));
  }
  for (auto& w : workers) {
    w->Start();
  }
  all_done.WaitForNotification();
  Stats total;
  for (const auto& w : workers) {
    total.Merge(w->stats());
  }
  return total;
}

// The closed loop with blocking calls: one thread per slot waits on its own call.
Stats RunClosedLoopBlocking(RunState* run) {
  const int n = run->config->concurrency;
  std::vector<Stats> stats(n);
  std::vector<std::thread> threads;
  threads.reserve(n);
  for (int i = 0; i < n; ++i) {
    threads.emplace_back([run, i, &stats] {
      pb::EmbeddingService::Stub* stub = run->stubs[i % run->stubs.size()].get();
      pb::LookUpResponse response;
      while (true) {
        const int64_t start = NowNanos();
        bool measured = false;
        if (!run->MayStart(start, &measured)) {
          return;
        }
        const pb::LookUpRequest& request =
            run->RequestFor(run->next_seq.fetch_add(1, std::memory_order_relaxed));
        grpc::ClientContext ctx;
        run->SetDeadline(&ctx);
        response.Clear();
        const grpc::Status status = stub->LookUp(&ctx, request, &response);
        const int64_t done = NowNanos();
        if (measured) {
          stats[i].Add(absl::Nanoseconds(done - start), absl::Nanoseconds(done - start), done,
                       status, response, request.ids_size());
        }
      }
    });
  }
  Stats total;
  for (int i = 0; i < n; ++i) {
    threads[i].join();
    total.Merge(stats[i]);
  }
  return total;
}

// Open loop: call i is due at start + i / rps and is started then (or as soon as a slot is
// free); its latency runs from the due time.
Stats RunOpenLoop(RunState* run, int64_t start_ns) {
  constexpr int kShards = 16;
  struct Shard {
    absl::Mutex mu;
    Stats stats ABSL_GUARDED_BY(mu);
  };
  struct Call {
    grpc::ClientContext ctx;
    pb::LookUpResponse response;
    int64_t due_ns = 0;
    int64_t sent_ns = 0;
    bool measured = false;
    int64_t num_ids = 0;
    Shard* shard = nullptr;
  };
  std::vector<Shard> shards(kShards);
  std::atomic<int64_t> inflight{0};
  const BenchConfig& config = *run->config;
  const double interval_ns = 1e9 / config.rps;
  int64_t measured = 0;
  for (int64_t i = 0;; ++i) {
    const int64_t due = start_ns + std::llround(static_cast<double>(i) * interval_ns);
    if (due >= run->stop_ns) {
      break;
    }
    if (NowNanos() >= run->stop_ns) {
      // Behind schedule at the end: the calls still due were never sent. Counted, not made, so
      // that a generator slower than its rate ends on time.
      run->unsent = static_cast<int64_t>(
                        std::ceil(static_cast<double>(run->stop_ns - start_ns) / interval_ns)) -
                    i;
      break;
    }
    const bool is_measured = due >= run->measure_start_ns;
    if (is_measured && config.requests > 0 && measured++ >= config.requests) {
      break;
    }
    // Sleep until shortly before `due`, then spin: sleep alone overshoots by tens of us.
    for (int64_t now = NowNanos(); now < due; now = NowNanos()) {
      if (due - now > 200'000) {
        std::this_thread::sleep_for(std::chrono::nanoseconds(due - now - 100'000));
      } else {
        std::this_thread::yield();
      }
    }
    while (inflight.load(std::memory_order_acquire) >= config.max_inflight) {
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
    const int64_t seq = run->next_seq.fetch_add(1, std::memory_order_relaxed);
    const pb::LookUpRequest& request = run->RequestFor(seq);
    auto* call = new Call;
    call->due_ns = due;
    call->sent_ns = NowNanos();
    call->measured = is_measured;
    call->num_ids = request.ids_size();
    call->shard = &shards[seq % kShards];
    run->SetDeadline(&call->ctx);
    inflight.fetch_add(1, std::memory_order_acq_rel);
    run->stubs[seq % run->stubs.size()]->async()->LookUp(
        &call->ctx, &request, &call->response, [call, &inflight](const grpc::Status& s) {
          const int64_t done = NowNanos();
          if (call->measured) {
            absl::MutexLock lock(&call->shard->mu);
            call->shard->stats.Add(absl::Nanoseconds(done - call->due_ns),
                                   absl::Nanoseconds(done - call->sent_ns), done, s, call->response,
                                   call->num_ids);
          }
          delete call;
          inflight.fetch_sub(1, std::memory_order_acq_rel);
        });
  }
  while (inflight.load(std::memory_order_acquire) > 0) {
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  Stats total;
  for (Shard& shard : shards) {
    absl::MutexLock lock(&shard.mu);
    total.Merge(shard.stats);
  }
  return total;
}

absl::Status ValidateConfig(const BenchConfig& c) {
  if (c.connections < 1 || c.concurrency < 1 || c.max_inflight < 1) {
    return absl::InvalidArgumentError("connections, concurrency and max_inflight must be >= 1");
  }
  if (c.blocking && c.rps == 0 && c.concurrency > kMaxBlockingSlots) {
    return absl::InvalidArgumentError(absl::StrCat("blocking runs a thread per slot: concurrency ",
                                                   c.concurrency, " is over the limit of ",
                                                   kMaxBlockingSlots, "; use callbacks"));
  }
  if (!(c.rps >= 0) || std::isinf(c.rps)) {
    return absl::InvalidArgumentError("rps must be >= 0 and finite");
  }
  if (c.ids_per_request < 1) {
    return absl::InvalidArgumentError("ids_per_request must be >= 1");
  }
  if (c.requests < 0) {
    return absl::InvalidArgumentError("requests must be >= 0");
  }
  if (c.requests == 0 &&
      (c.duration <= absl::ZeroDuration() || c.duration == absl::InfiniteDuration())) {
    return absl::InvalidArgumentError("duration must be positive and finite (or set requests)");
  }
  if (c.warmup < absl::ZeroDuration() || c.warmup == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError("warmup must be >= 0 and finite");
  }
  if (c.timeout <= absl::ZeroDuration() || c.timeout == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError("timeout must be positive and finite");
  }
  return absl::OkStatus();
}

}  // namespace

int64_t PercentileOfSorted(absl::Span<const int64_t> sorted, double p) {
  if (sorted.empty()) {
    return 0;
  }
  const double n = static_cast<double>(sorted.size());
  // Rank ceil(p/100 * n), 1-based; a small tolerance keeps e.g. 99.9% of 1000 at rank 999.
  double rank = std::ceil(p / 100.0 * n - 1e-9);
  rank = std::clamp(rank, 1.0, n);
  return sorted[static_cast<size_t>(rank) - 1];
}

void LatencyRecorder::Merge(const LatencyRecorder& other) {
  nanos_.insert(nanos_.end(), other.nanos_.begin(), other.nanos_.end());
}

LatencySummary LatencyRecorder::Summarize() {
  LatencySummary s;
  s.count = static_cast<int64_t>(nanos_.size());
  if (nanos_.empty()) {
    return s;
  }
  std::sort(nanos_.begin(), nanos_.end());
  long double sum = 0;
  for (int64_t v : nanos_) {
    sum += v;
  }
  s.min = absl::Nanoseconds(nanos_.front());
  s.max = absl::Nanoseconds(nanos_.back());
  s.mean = absl::Nanoseconds(std::llround(static_cast<double>(sum / nanos_.size())));
  s.p50 = absl::Nanoseconds(PercentileOfSorted(nanos_, 50));
  s.p90 = absl::Nanoseconds(PercentileOfSorted(nanos_, 90));
  s.p99 = absl::Nanoseconds(PercentileOfSorted(nanos_, 99));
  s.p999 = absl::Nanoseconds(PercentileOfSorted(nanos_, 99.9));
  return s;
}

ZipfIdSampler::ZipfIdSampler(int64_t num_rows,  // NOLINT(bugprone-easily-swappable-parameters)
                             double exponent)
    : num_rows_(num_rows), exponent_(exponent) {
  h_integral_x1_ = HIntegral(1.5) - 1;
  h_integral_n_ = HIntegral(static_cast<double>(num_rows_) + 0.5);
  s_ = 2 - HIntegralInverse(HIntegral(2.5) - H(2));
}

// h(x) = 1 / x^exponent, the unnormalized density.
double ZipfIdSampler::H(double x) const { return std::exp(-exponent_ * std::log(x)); }

// An antiderivative of h: (x^(1-e) - 1) / (1-e), or log(x) at e = 1.
double ZipfIdSampler::HIntegral(double x) const {
  const double log_x = std::log(x);
  return Helper2((1 - exponent_) * log_x) * log_x;
}

double ZipfIdSampler::HIntegralInverse(double x) const {
  double t = x * (1 - exponent_);
  if (t < -1) {
    t = -1;  // rounding can push it just below the domain
  }
  return std::exp(Helper1(t) * x);
}

int64_t ZipfIdSampler::Sample(BenchRng& rng) const {
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  while (true) {
    // u is uniform in (h_integral_x1_, h_integral_n_].
    const double u = h_integral_n_ + unit(rng) * (h_integral_x1_ - h_integral_n_);
    const double x = HIntegralInverse(u);
    int64_t k = std::llround(x);
    k = std::clamp<int64_t>(k, 1, num_rows_);
    const double kd = static_cast<double>(k);
    if (kd - x <= s_ || u >= HIntegral(kd + 0.5) - H(kd)) {
      return k - 1;
    }
  }
}

absl::StatusOr<IdDistribution> ParseIdDistribution(absl::string_view name) {
  if (name == "uniform") {
    return IdDistribution::kUniform;
  }
  if (name == "zipf") {
    return IdDistribution::kZipf;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("id distribution must be uniform or zipf, got \"", name, "\""));
}

absl::StatusOr<IdSampler> IdSampler::Create(IdDistribution distribution, int64_t num_rows,
                                            double zipf_exponent) {
  if (num_rows < 1) {
    return absl::InvalidArgumentError(absl::StrCat("cannot sample ids from ", num_rows, " rows"));
  }
  IdSampler sampler;
  if (distribution == IdDistribution::kZipf) {
    if (!(zipf_exponent > 0) || std::isinf(zipf_exponent)) {
      return absl::InvalidArgumentError(
          absl::StrCat("zipf exponent must be positive and finite, got ", zipf_exponent));
    }
    sampler.zipf_.emplace(num_rows, zipf_exponent);
  } else {
    sampler.uniform_.emplace(num_rows);
  }
  return sampler;
}

absl::StatusOr<BenchReport> RunBench(const BenchConfig& config) {
  if (absl::Status s = ValidateConfig(config); !s.ok()) {
    return s;
  }
  RunState run;
  run.config = &config;
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  const auto connect_deadline = absl::ToChronoTime(absl::Now() + config.timeout);
  for (int i = 0; i < config.connections; ++i) {
    channels.push_back(CreateChannel(config.target, config.tls, i));
    if (!channels.back()->WaitForConnected(connect_deadline)) {
      return absl::UnavailableError(absl::StrCat("could not connect to ", config.target, " within ",
                                                 absl::FormatDuration(config.timeout)));
    }
    run.stubs.push_back(pb::EmbeddingService::NewStub(channels.back()));
  }

  BenchReport report;
  {
    EmbeddingClient client(channels.front());
    absl::StatusOr<std::vector<TableInfo>> tables = client.ListTables(config.timeout);
    if (!tables.ok()) {
      return tables.status();
    }
    const TableInfo* found = nullptr;
    for (const TableInfo& t : *tables) {
      if (config.table.empty() ? t.is_default : t.name == config.table) {
        found = &t;
        break;
      }
    }
    if (found == nullptr && config.table.empty() && !tables->empty()) {
      found = &tables->front();  // the default table comes first
    }
    if (found == nullptr) {
      return absl::NotFoundError(
          config.table.empty() ? "the server has no tables"
                               : absl::StrCat("the server has no table \"", config.table, "\""));
    }
    report.table = found->name;
    report.rows = found->rows;
    report.dim = found->dim;
  }

  absl::StatusOr<IdSampler> sampler =
      IdSampler::Create(config.distribution, report.rows, config.zipf_exponent);
  if (!sampler.ok()) {
    return sampler.status();
  }
  // A pool of requests, reused round-robin: drawing ids on the request path would make the client
  // the bottleneck for large requests. At least 2^16 ids (16..4096 requests), at most 2^23 ids.
  const int64_t ids = config.ids_per_request;
  int64_t pool_size = std::clamp<int64_t>(((int64_t{1} << 16) + ids - 1) / ids, 16, 4096);
  pool_size = std::clamp<int64_t>(std::min(pool_size, (int64_t{1} << 23) / ids), 1, 4096);
  BenchRng rng(config.seed);
  run.pool.resize(pool_size);
  for (pb::LookUpRequest& request : run.pool) {
    request.set_table(config.table);
    request.set_dtype(config.dtype.has_value() ? static_cast<pb::DataType>(*config.dtype)
                                               : pb::DATA_TYPE_UNSPECIFIED);
    request.mutable_ids()->Reserve(static_cast<int>(ids));
    for (int64_t i = 0; i < ids; ++i) {
      request.add_ids(sampler->Sample(rng));
    }
  }

  const int64_t start_ns = NowNanos();
  run.measure_start_ns = start_ns + absl::ToInt64Nanoseconds(config.warmup);
  run.stop_ns = config.requests > 0
                    ? std::numeric_limits<int64_t>::max()
                    : run.measure_start_ns + absl::ToInt64Nanoseconds(config.duration);
  Stats stats = config.rps > 0    ? RunOpenLoop(&run, start_ns)
                : config.blocking ? RunClosedLoopBlocking(&run)
                                  : RunClosedLoop(&run);

  report.requests = static_cast<int64_t>(stats.latencies.count());
  report.duration_s = report.requests > 0
                          ? static_cast<double>(stats.last_done_ns - run.measure_start_ns) / 1e9
                          : 0.0;
  report.ok_ids = stats.ok_ids;
  report.payload_bytes = stats.payload_bytes;
  report.latency = stats.latencies.Summarize();
  report.ok_latency = stats.ok_latencies.Summarize();
  report.unsent = run.unsent;
  for (const auto& [code, n] : stats.codes) {
    report.codes[absl::StatusCodeToString(static_cast<absl::StatusCode>(code))] = n;
  }
  return report;
}

std::string FormatBenchJson(const BenchReport& r) {
  std::string codes;
  for (const auto& [name, n] : r.codes) {
    absl::StrAppend(&codes, codes.empty() ? "" : ",", JsonString(name), ":", n);
  }
  const LatencySummary& l = r.latency;
  return absl::StrFormat(
      "{\"requests\":%d,\"duration_s\":%.6f,\"rps\":%.3f,\"ids_per_s\":%.3f,"
      "\"payload_mb_per_s\":%.6f,\"latency_us\":{\"p50\":%.3f,\"p90\":%.3f,\"p99\":%.3f,"
      "\"p999\":%.3f,\"max\":%.3f,\"mean\":%.3f},\"ok_latency_us\":{\"p50\":%.3f,"
      "\"p99\":%.3f,\"max\":%.3f},\"unsent\":%d,\"codes\":{%s},\"table\":%s,\"rows\":%d,\"dim\":%"
      "d}",
      r.requests, r.duration_s, r.rps(), r.ids_per_s(), r.payload_mb_per_s(), Micros(l.p50),
      Micros(l.p90), Micros(l.p99), Micros(l.p999), Micros(l.max), Micros(l.mean),
      Micros(r.ok_latency.p50), Micros(r.ok_latency.p99), Micros(r.ok_latency.max), r.unsent, codes,
      JsonString(r.table), r.rows, r.dim);
}

std::string FormatBenchText(const BenchConfig& c, const BenchReport& r) {
  std::string out;
  absl::StrAppendFormat(&out, "target        %s, table \"%s\" (%d x %d), %d ids/request, %s ids\n",
                        c.target, r.table, r.rows, r.dim, c.ids_per_request,
                        c.distribution == IdDistribution::kZipf
                            ? absl::StrFormat("zipf(%g)", c.zipf_exponent)
                            : std::string("uniform"));
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
  return out;
}

}  // namespace emb::client
