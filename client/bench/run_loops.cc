#include "client/bench/run_loops.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "client/bench/trampoline.h"

namespace emb::client::internal {
namespace {

namespace pb = ::embedding::v1;

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
  const CallStats& stats() const { return stats_; }

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
    // The last call's context goes before the run is told: the caller may destroy the channels
    // as soon as it is (see EmbeddingClient::LookUpAsync).
    ctx_.reset();
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
  CallStats stats_;
};

}  // namespace

int64_t NowNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void CallStats::Add(absl::Duration latency, absl::Duration sent_latency, int64_t done_ns,
                    const grpc::Status& status, const pb::LookUpResponse& response,
                    int64_t num_ids) {
  latencies.Record(latency);
  ++codes[status.error_code()];
  if (!status.ok() && first_messages.count(status.error_code()) == 0) {
    first_messages.emplace(status.error_code(), status.error_message());
  }
  if (status.ok()) {
    ok_latencies.Record(sent_latency);
    ok_ids += num_ids;
    payload_bytes += static_cast<int64_t>(response.embeddings().size());
  }
  last_done_ns = std::max(last_done_ns, done_ns);
}

void CallStats::Merge(const CallStats& other) {
  latencies.Merge(other.latencies);
  ok_latencies.Merge(other.ok_latencies);
  for (const auto& [code, n] : other.codes) {
    codes[code] += n;
  }
  for (const auto& [code, message] : other.first_messages) {
    first_messages.emplace(code, message);  // keeps this one's where both have one
  }
  ok_ids += other.ok_ids;
  payload_bytes += other.payload_bytes;
  last_done_ns = std::max(last_done_ns, other.last_done_ns);
}

bool RunState::MayStart(int64_t now, bool* measured) {
  if (now >= stop_ns) {
    return false;
  }
  *measured = now >= measure_start_ns;
  return !(*measured && config->requests > 0 &&
           measured_issued.fetch_add(1, std::memory_order_relaxed) >= config->requests);
}

CallStats RunClosedLoop(RunState* run) {
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
  CallStats total;
  for (const auto& w : workers) {
    total.Merge(w->stats());
  }
  return total;
}

// The closed loop with blocking calls: one thread per slot waits on its own call.
CallStats RunClosedLoopBlocking(RunState* run) {
  const int n = run->config->concurrency;
  std::vector<CallStats> stats(n);
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
  CallStats total;
  for (int i = 0; i < n; ++i) {
    threads[i].join();
    total.Merge(stats[i]);
  }
  return total;
}

CallStats RunOpenLoop(RunState* run, int64_t start_ns) {
  constexpr int kShards = 16;
  struct Shard {
    absl::Mutex mu;
    CallStats stats ABSL_GUARDED_BY(mu);
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
  CallStats total;
  for (Shard& shard : shards) {
    absl::MutexLock lock(&shard.mu);
    total.Merge(shard.stats);
  }
  return total;
}

}  // namespace emb::client::internal
