#include "service/rpc/unsent_answers.h"

#include <algorithm>
#include <deque>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/container/node_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

namespace emb::service {

namespace {

// The weight of a new sample of a connection's rate against what was learned before.
constexpr double kRateSampleWeight = 0.25;
// Claims a connection needs before its next is judged by its deadline.
constexpr int kQueuedClaims = 2;
// The fewest bytes (an answer's and those it queued behind) whose time teaches a rate: below it,
// the time is mostly each call's own cost, not its bytes (small answers behind small answers,
// on the 2-core machine with two busy loops, taught 0.5 MB/s, and a 4 MiB answer with 60 s to
// go was refused).
constexpr size_t kMinSampleBytes = size_t{1} << 20;

std::string FormatMillis(absl::Duration d) {
  return absl::StrCat(absl::SixDigits(absl::ToDoubleMilliseconds(d)), " ms");
}

double Blend(double learned, double sample) {
  return learned == 0 ? sample : learned + kRateSampleWeight * (sample - learned);
}

}  // namespace

struct UnsentAnswers::Claim::Connection {
  const std::string* name = nullptr;  // the map's key
  size_t held = 0;
  int claims = 0;
  double bytes_per_second = 0;  // the drain rate learned; 0: none
  int waiting = 0;              // calls waiting for room (UnsentAnswers::Admit)
  size_t waiting_bytes = 0;     // their answers' bytes
};

// Shared with the claims, which may outlive the UnsentAnswers.
struct UnsentAnswers::Claim::State {
  State(prometheus::Gauge* gauge, Clock* clock) : clock(clock), gauge(gauge) {}

  void Release(const Claim& claim) {
    const absl::Time now = clock->Now();
    absl::MutexLock lock(&mu);
    Connection& c = *claim.connection_;
    // The rate at which this answer and those it queued behind drained: the prediction's own
    // terms, so that the rate calibrates the prediction. Answers that queued behind none teach
    // nothing (a lone answer's time is its latency, not a rate).
    if (claim.ahead_ > 0 && claim.ahead_ + claim.bytes_ >= kMinSampleBytes && now > claim.taken_) {
      const double sample = static_cast<double>(claim.ahead_ + claim.bytes_) /
                            absl::ToDoubleSeconds(now - claim.taken_);
      c.bytes_per_second = Blend(c.bytes_per_second, sample);
      last_rate = Blend(last_rate, sample);
    }
    --c.claims;
    held -= claim.bytes_;
    c.held -= claim.bytes_;
    ForgetIfUnused(c);
    if (gauge != nullptr) {
      gauge->Set(static_cast<double>(held));
    }
    if (!waiters.empty()) {
      admissions.Signal();
    }
  }

  // Drops `c` once no claim and no waiting call refer to it.
  void ForgetIfUnused(Connection& c) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    if (c.held == 0 && c.waiting == 0) {
      connections.erase(*c.name);
    }
  }

  // A call waiting for room (UnsentAnswers::Admit).
  struct Waiter {
    Connection* connection;
    size_t bytes;
    absl::Time deadline;
    const std::atomic<bool>* cancelled;
    Bound waiting_for;
    Admitted admitted;
  };

  Clock* const clock;
  absl::Mutex mu;
  prometheus::Gauge* gauge ABSL_GUARDED_BY(mu);  // nullptr once the UnsentAnswers is gone
  prometheus::Gauge* waiting_gauge ABSL_GUARDED_BY(mu) = nullptr;
  std::deque<Waiter> waiters ABSL_GUARDED_BY(mu);  // in arrival order
  absl::CondVar admissions;                        // signalled when room may have been made
  bool stopping ABSL_GUARDED_BY(mu) = false;
  size_t held ABSL_GUARDED_BY(mu) = 0;
  // The rate learned on any connection: the estimate for one that has learned none yet.
  double last_rate ABSL_GUARDED_BY(mu) = 0;
  // Only connections with bytes held; node-based, so a claim's Connection* stays valid.
  absl::node_hash_map<std::string, Connection> connections ABSL_GUARDED_BY(mu);
};

UnsentAnswers::Claim::Claim(std::shared_ptr<State> state, Connection* connection, size_t bytes,
                            size_t ahead, absl::Time taken)
    : state_(std::move(state)),
      connection_(connection),
      bytes_(bytes),
      ahead_(ahead),
      taken_(taken) {}

UnsentAnswers::Claim::Claim(Claim&& other) noexcept
    : state_(std::move(other.state_)),
      connection_(std::exchange(other.connection_, nullptr)),
      bytes_(std::exchange(other.bytes_, 0)),
      ahead_(std::exchange(other.ahead_, 0)),
      taken_(other.taken_) {}

UnsentAnswers::Claim& UnsentAnswers::Claim::operator=(Claim&& other) noexcept {
  if (this != &other) {
    Release();
    state_ = std::move(other.state_);
    connection_ = std::exchange(other.connection_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
    ahead_ = std::exchange(other.ahead_, 0);
    taken_ = other.taken_;
  }
  return *this;
}

UnsentAnswers::Claim::~Claim() { Release(); }

void UnsentAnswers::Claim::Release() {
  if (state_ != nullptr) {
    state_->Release(*this);
    state_.reset();
    connection_ = nullptr;
    bytes_ = 0;
    ahead_ = 0;
  }
}

UnsentAnswers::UnsentAnswers(Bounds bounds, prometheus::Gauge* held, Clock* clock,
                             prometheus::Gauge* waiting)
    : bounds_(bounds), state_(std::make_shared<Claim::State>(held, clock)) {
  if (held != nullptr) {
    held->Set(0);
  }
  if (waiting != nullptr) {
    waiting->Set(0);
  }
  {
    absl::MutexLock lock(&state_->mu);
    state_->waiting_gauge = waiting;
  }
  admissions_ = std::thread([this] { RunAdmissions(); });
}

UnsentAnswers::~UnsentAnswers() {
  {
    absl::MutexLock lock(&state_->mu);
    state_->stopping = true;
    state_->admissions.Signal();
  }
  admissions_.join();
  absl::MutexLock lock(&state_->mu);
  state_->gauge = nullptr;  // the metrics may go before the last claim
  state_->waiting_gauge = nullptr;
}

void UnsentAnswers::Wake() {
  absl::MutexLock lock(&state_->mu);
  if (!state_->waiters.empty()) {
    state_->admissions.Signal();
  }
}

size_t UnsentAnswers::waiting_calls() const {
  absl::MutexLock lock(&state_->mu);
  return state_->waiters.size();
}

absl::StatusOr<UnsentAnswers::Claim> UnsentAnswers::Take(absl::string_view connection, size_t bytes,
                                                         Bound* refused_by, absl::Time deadline) {
  Admission a = Admit(connection, bytes, deadline, nullptr, nullptr, refused_by);
  if (!a.status.ok()) {
    return a.status;
  }
  return std::move(a.claim);
}

UnsentAnswers::Admission UnsentAnswers::Admit(absl::string_view connection, size_t bytes,
                                              absl::Time deadline,
                                              const std::atomic<bool>* cancelled, Admitted admitted,
                                              Bound* refused_by) {
  *refused_by = Bound::kNone;
  Admission a;
  if (bytes == 0) {
    return a;
  }
  Claim::State& s = *state_;
  const absl::Time now = s.clock->Now();
  if (bounds_.deadline_fraction > 0 && deadline <= now) {
    *refused_by = Bound::kDeadline;
    a.status = absl::DeadlineExceededError("the call's deadline passed before it was admitted");
    return a;
  }
  absl::MutexLock lock(&s.mu);
  auto it = s.connections.find(connection);
  const size_t connection_held = it != s.connections.end() ? it->second.held : 0;
  const size_t connection_waiting = it != s.connections.end() ? it->second.waiting_bytes : 0;
  // Judged only behind kQueuedClaims answers or more: the rate is learned from answers that
  // queued, so a connection must always be let to queue one, or a rate learned in a bad moment
  // would never be corrected (on the H200, 5.8 MB/s learned in the first burst of 4,096 callers
  // then refused every second call on its connection for the rest of the run).
  if (bounds_.deadline_fraction > 0 && it != s.connections.end() &&
      it->second.claims >= kQueuedClaims && deadline != absl::InfiniteFuture()) {
    const double rate = it->second.bytes_per_second > 0 ? it->second.bytes_per_second : s.last_rate;
    if (rate > 0) {
      const size_t ahead = connection_held + connection_waiting;
      const absl::Duration sent_in =
          absl::Seconds(static_cast<double>(ahead + bounds_.socket_bytes + bytes) / rate);
      const absl::Duration left = deadline - now;
      if (sent_in > left * bounds_.deadline_fraction) {
        *refused_by = Bound::kDeadline;
        a.status = absl::ResourceExhaustedError(absl::StrCat(
            "this answer would be sent too late: this connection's answers not yet sent hold ",
            ahead, " bytes, which drain at ", absl::SixDigits(rate / 1e6), " MB/s, so this one's ",
            bytes, " would be sent in about ", FormatMillis(sent_in), ", past ",
            absl::SixDigits(bounds_.deadline_fraction), " of the ", FormatMillis(left),
            " left before its deadline (--deadline_admission_fraction); "
            "retry with back-off or a longer deadline"));
        return a;
      }
    }
  }
  const Bound full = FullBound(connection_held, bytes);
  const int waiting = it != s.connections.end() ? it->second.waiting : 0;
  if (full == Bound::kNone && waiting == 0) {  // calls already waiting on the connection go first
    if (it == s.connections.end()) {
      it = s.connections.try_emplace(std::string(connection)).first;
      it->second.name = &it->first;
    }
    a.claim = ClaimLocked(&it->second, bytes, now);
    return a;
  }
  const bool fits_alone = bytes <= bounds_.per_connection && bytes <= bounds_.total;
  if (admitted != nullptr && fits_alone && waiting < bounds_.waiting_per_connection) {
    if (it == s.connections.end()) {
      it = s.connections.try_emplace(std::string(connection)).first;
      it->second.name = &it->first;
    }
    ++it->second.waiting;
    it->second.waiting_bytes += bytes;
    s.waiters.push_back({&it->second, bytes, deadline, cancelled,
                         full == Bound::kNone ? Bound::kConnection : full, std::move(admitted)});
    if (s.waiting_gauge != nullptr) {
      s.waiting_gauge->Set(static_cast<double>(s.waiters.size()));
    }
    a.waiting = true;
    return a;
  }
  if (full == Bound::kNone) {
    // Refused only for the calls waiting ahead of it: say so.
    *refused_by = Bound::kConnection;
    a.status = absl::ResourceExhaustedError(absl::StrCat(
        "this connection already has ", waiting,
        " calls waiting for room for their answers (the most that may wait on one connection); "
        "read the answers, or retry with back-off"));
    return a;
  }
  *refused_by = full;
  if (full == Bound::kConnection) {
    a.status = absl::ResourceExhaustedError(absl::StrCat(
        "this connection's answers not yet sent hold ", connection_held, " bytes; this answer's ",
        bytes, " would pass the bound of ", bounds_.per_connection,
        " bytes per connection (--max_unsent_answer_bytes_per_connection): read the answers, "
        "or retry with back-off"));
  } else {
    a.status = absl::ResourceExhaustedError(
        absl::StrCat("answers not yet sent hold ", s.held, " bytes; this answer's ", bytes,
                     " would pass the server's bound of ", bounds_.total,
                     " bytes (--max_unsent_answer_bytes); retry with back-off"));
  }
  return a;
}

UnsentAnswers::Bound UnsentAnswers::FullBound(size_t connection_held, size_t bytes) const {
  if (bytes > bounds_.per_connection - std::min(connection_held, bounds_.per_connection)) {
    return Bound::kConnection;
  }
  if (bytes > bounds_.total - std::min(state_->held, bounds_.total)) {
    return Bound::kTotal;
  }
  return Bound::kNone;
}

UnsentAnswers::Claim UnsentAnswers::ClaimLocked(Claim::Connection* c, size_t bytes,
                                                absl::Time now) {
  Claim::State& s = *state_;
  const size_t ahead = c->held;
  ++c->claims;
  c->held += bytes;
  s.held += bytes;
  if (s.gauge != nullptr) {
    s.gauge->Set(static_cast<double>(s.held));
  }
  return Claim(state_, c, bytes, ahead, now);
}

void UnsentAnswers::RunAdmissions() {
  Claim::State& s = *state_;
  // The callbacks of the calls that leave the wait, run without the lock.
  struct Leaving {
    Admitted admitted;
    absl::StatusOr<Claim> claim;
    Bound waited_for;
  };
  std::vector<Leaving> leaving;
  absl::MutexLock lock(&s.mu);
  for (;;) {
    const absl::Time now = s.clock->Now();
    absl::Time next_deadline = absl::InfiniteFuture();
    absl::flat_hash_set<const Claim::Connection*> blocked;  // a call ahead of theirs waits on
    for (auto w = s.waiters.begin(); w != s.waiters.end();) {
      absl::StatusOr<Claim> claim = absl::UnavailableError("");
      if (s.stopping) {
        claim = absl::UnavailableError("the server is shutting down; retry on another replica");
      } else if (w->cancelled != nullptr && w->cancelled->load(std::memory_order_relaxed)) {
        claim = absl::CancelledError("the call was cancelled while it waited for answer memory");
      } else if (w->deadline <= now) {
        claim = absl::DeadlineExceededError(
            absl::StrCat("the call's deadline passed while it waited for room for its answer of ",
                         w->bytes, " bytes (answers not yet sent: ", s.held, " bytes in all, ",
                         w->connection->held, " on its connection)"));
      } else if (!blocked.contains(w->connection) &&
                 FullBound(w->connection->held, w->bytes) == Bound::kNone) {
        claim = ClaimLocked(w->connection, w->bytes, now);
      } else {
        blocked.insert(w->connection);
        next_deadline = std::min(next_deadline, w->deadline);
        ++w;
        continue;
      }
      Claim::Connection& c = *w->connection;
      --c.waiting;
      c.waiting_bytes -= w->bytes;
      leaving.push_back({std::move(w->admitted), std::move(claim), w->waiting_for});
      w = s.waiters.erase(w);
      s.ForgetIfUnused(c);
    }
    if (s.waiting_gauge != nullptr) {
      s.waiting_gauge->Set(static_cast<double>(s.waiters.size()));
    }
    if (!leaving.empty()) {
      s.mu.Unlock();
      for (Leaving& l : leaving) {
        l.admitted(std::move(l.claim), l.waited_for);
      }
      leaving.clear();  // a claim of a call whose callback did not keep it is released here
      s.mu.Lock();
      continue;
    }
    if (s.stopping) {
      return;
    }
    if (next_deadline == absl::InfiniteFuture()) {
      s.admissions.Wait(&s.mu);
    } else {
      s.admissions.WaitWithTimeout(&s.mu, next_deadline - now);
    }
  }
}

size_t UnsentAnswers::held_bytes() const {
  absl::MutexLock lock(&state_->mu);
  return state_->held;
}

size_t UnsentAnswers::held_bytes(absl::string_view connection) const {
  absl::MutexLock lock(&state_->mu);
  auto it = state_->connections.find(connection);
  return it != state_->connections.end() ? it->second.held : 0;
}

double UnsentAnswers::drain_rate(absl::string_view connection) const {
  absl::MutexLock lock(&state_->mu);
  auto it = state_->connections.find(connection);
  return it != state_->connections.end() ? it->second.bytes_per_second : 0;
}

size_t UnsentAnswers::connections_for_test() const {
  absl::MutexLock lock(&state_->mu);
  return state_->connections.size();
}

}  // namespace emb::service
