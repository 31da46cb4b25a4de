#include "service/rpc/unsent_answers.h"

#include <algorithm>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/node_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

namespace emb::service {

struct UnsentAnswers::Claim::Connection {
  const std::string* name = nullptr;  // the map's key
  size_t held = 0;
};

// Shared with the claims, which may outlive the UnsentAnswers.
struct UnsentAnswers::Claim::State {
  explicit State(prometheus::Gauge* gauge) : gauge(gauge) {}

  void Release(Connection* connection, size_t bytes) {
    absl::MutexLock lock(&mu);
    held -= bytes;
    connection->held -= bytes;
    if (connection->held == 0) {
      connections.erase(*connection->name);  // no claim refers to it any more
    }
    if (gauge != nullptr) {
      gauge->Set(static_cast<double>(held));
    }
  }

  absl::Mutex mu;
  prometheus::Gauge* gauge ABSL_GUARDED_BY(mu);  // nullptr once the UnsentAnswers is gone
  size_t held ABSL_GUARDED_BY(mu) = 0;
  // Only connections with bytes held; node-based, so a claim's Connection* stays valid.
  absl::node_hash_map<std::string, Connection> connections ABSL_GUARDED_BY(mu);
};

UnsentAnswers::Claim::Claim(std::shared_ptr<State> state, Connection* connection, size_t bytes)
    : state_(std::move(state)), connection_(connection), bytes_(bytes) {}

UnsentAnswers::Claim::Claim(Claim&& other) noexcept
    : state_(std::move(other.state_)),
      connection_(std::exchange(other.connection_, nullptr)),
      bytes_(std::exchange(other.bytes_, 0)) {}

UnsentAnswers::Claim& UnsentAnswers::Claim::operator=(Claim&& other) noexcept {
  if (this != &other) {
    Release();
    state_ = std::move(other.state_);
    connection_ = std::exchange(other.connection_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

UnsentAnswers::Claim::~Claim() { Release(); }

void UnsentAnswers::Claim::Release() {
  if (state_ != nullptr) {
    state_->Release(connection_, bytes_);
    state_.reset();
    connection_ = nullptr;
    bytes_ = 0;
  }
}

UnsentAnswers::UnsentAnswers(Bounds bounds, prometheus::Gauge* held)
    : bounds_(bounds), state_(std::make_shared<Claim::State>(held)) {
  if (held != nullptr) {
    held->Set(0);
  }
}

UnsentAnswers::~UnsentAnswers() {
  absl::MutexLock lock(&state_->mu);
  state_->gauge = nullptr;  // the metrics may go before the last claim
}

absl::StatusOr<UnsentAnswers::Claim> UnsentAnswers::Take(absl::string_view connection, size_t bytes,
                                                         Bound* refused_by) {
  *refused_by = Bound::kNone;
  if (bytes == 0) {
    return Claim();
  }
  Claim::State& s = *state_;
  absl::MutexLock lock(&s.mu);
  auto it = s.connections.find(connection);
  const size_t connection_held = it != s.connections.end() ? it->second.held : 0;
  if (bytes > bounds_.per_connection - std::min(connection_held, bounds_.per_connection)) {
    *refused_by = Bound::kConnection;
    return absl::ResourceExhaustedError(absl::StrCat(
        "this connection's answers not yet sent hold ", connection_held, " bytes; this answer's ",
        bytes, " would pass the bound of ", bounds_.per_connection,
        " bytes per connection (--max_unsent_answer_bytes_per_connection): read the answers, "
        "or retry with back-off"));
  }
  if (bytes > bounds_.total - std::min(s.held, bounds_.total)) {
    *refused_by = Bound::kTotal;
    return absl::ResourceExhaustedError(
        absl::StrCat("answers not yet sent hold ", s.held, " bytes; this answer's ", bytes,
                     " would pass the server's bound of ", bounds_.total,
                     " bytes (--max_unsent_answer_bytes); retry with back-off"));
  }
  if (it == s.connections.end()) {
    it = s.connections.try_emplace(std::string(connection)).first;
    it->second.name = &it->first;
  }
  it->second.held += bytes;
  s.held += bytes;
  if (s.gauge != nullptr) {
    s.gauge->Set(static_cast<double>(s.held));
  }
  return Claim(state_, &it->second, bytes);
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

size_t UnsentAnswers::connections_for_test() const {
  absl::MutexLock lock(&state_->mu);
  return state_->connections.size();
}

}  // namespace emb::service
