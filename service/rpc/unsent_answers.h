// UnsentAnswers: admission of LookUps by the memory their answers hold until gRPC has sent them,
// and by the time they would take to be sent.
//
// An answer's rows live in an AnswerBuffer from the moment its batch forms until gRPC has written
// the last byte to the socket (or dropped the call), and a client decides when that is: one that
// never reads, or never acknowledges the server's SETTINGS (so that gRPC 1.51 applies no stream
// limit to it), can make the server hold every answer it asks for. So each LookUp claims the
// bytes of its answer's block (AnswerBufferPool::BlockBytes) before it is queued, and keeps the
// claim until gRPC releases the answer; a LookUp whose claim would take the bytes held for its
// connection past `per_connection`, or those held for all connections past `total`, waits
// (Admit): it is admitted, in order, once answers ahead of it are sent and there is room. Waiting
// is back-pressure, not an error: a well-behaved client with many large answers in flight on one
// connection (64 callers of 6 MiB answers hold 400 MB; on the H200 the bound of 256 MiB refused
// a third of them before waiting existed) is served as a server without the bound would serve it,
// only later. A call leaves the wait with an error only when its deadline passes (DEADLINE_
// EXCEEDED) or it is cancelled. At most `waiting_per_connection` calls wait on one connection
// (the server sets it to its stream limit, which a well-behaved client never passes); a call past
// that is refused RESOURCE_EXHAUSTED, as is every call past a bound under Take(). A connection is
// named by the peer gRPC gives its calls (for TCP, the client's address and port: one per
// connection).
//
// The bound that results: at most `total` bytes of answer blocks are handed out at any time, at
// most `per_connection` to one connection; a connection's waiting calls hold their requests, no
// answer.
//
// Admission by deadline: gRPC shares a connection's bandwidth among its streams, so under
// overload every answer on a connection is sent slowly together, and past some backlog all of
// them miss their deadlines (4,096 callers with 250 ms deadlines received one answer in five the
// server sent, docs/reliability.md). So each connection learns the rate its answers drain at: each
// answer that queued behind others gives a sample, (bytes ahead of it + its own) / its time from
// claim to release (where those are 1 MiB or more: below, a call's own cost outweighs its bytes),
// the very terms of the prediction, so that uneven answers (a small one
// finishing beside a large one) skew it towards admitting, not refusing. A claim on a connection
// with two answers or more ahead of it is refused with RESOURCE_EXHAUSTED when (bytes ahead + its
// own) / rate exceeds `deadline_fraction` of the time left before its deadline: the call could not
// be answered in time, and refusing it costs far less than gathering and sending an answer nobody
// waits for. Fewer than two ahead, a call is always admitted, so that every connection keeps
// learning its rate (one learned in a bad moment would otherwise refuse that connection's calls for
// good). A connection that has not learned its rate yet uses the rate last learned on any
// connection; with none learned, the call is admitted. A call whose deadline has passed is refused
// DEADLINE_EXCEEDED.
//
// Thread-safe; a Claim may be released on any thread, also after the UnsentAnswers is gone (gRPC
// frees an answer's slices whenever it is done). Waiting calls are admitted on a thread of the
// UnsentAnswers' own, never on the thread that releases a claim (which may be inside gRPC).
#ifndef EMB_SERVICE_RPC_UNSENT_ANSWERS_H_
#define EMB_SERVICE_RPC_UNSENT_ANSWERS_H_

#include <atomic>
#include <cstddef>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "prometheus/gauge.h"
#include "service/common/clock.h"

namespace emb::service {

class UnsentAnswers {
 public:
  struct Bounds {
    size_t total = size_t{2} << 30;
    size_t per_connection = size_t{256} << 20;
    // Refuse a claim whose answer is predicted to be sent after this fraction of the time left
    // before its deadline; 0: no admission by deadline.
    double deadline_fraction = 0;
    // Bytes taken to wait past gRPC, in the kernel's socket buffers of a connection whose answers
    // queue (its client reads slower than the server sends), added to the bytes ahead when a
    // claim is judged: gRPC cannot see them. 0: none assumed.
    size_t socket_bytes = 0;
    // Calls that may wait for room on one connection (Admit); past it they are refused. 0: none
    // waits.
    int waiting_per_connection = 128;
  };

  // Which bound refused a claim (Take()'s `refused_by`).
  enum class Bound { kNone, kConnection, kTotal, kDeadline };

  // A claim on bytes of answer memory, given back when destroyed. Move-only.
  class Claim {
   public:
    Claim() = default;  // claims nothing
    Claim(Claim&& other) noexcept;
    Claim& operator=(Claim&& other) noexcept;
    Claim(const Claim&) = delete;
    Claim& operator=(const Claim&) = delete;
    ~Claim();

    size_t bytes() const { return bytes_; }

   private:
    friend class UnsentAnswers;
    struct Connection;
    struct State;
    Claim(std::shared_ptr<State> state, Connection* connection, size_t bytes, size_t ahead,
          absl::Time taken);
    void Release();

    std::shared_ptr<State> state_;
    Connection* connection_ = nullptr;
    size_t bytes_ = 0;
    size_t ahead_ = 0;  // bytes its connection held when it was taken
    absl::Time taken_;
  };

  // `held` and `waiting` (either may be nullptr) are set to the bytes held and the calls
  // waiting, while this object lives. `clock` must outlive every claim. Starts the admission
  // thread.
  UnsentAnswers(Bounds bounds, prometheus::Gauge* held, Clock* clock = Clock::Real(),
                prometheus::Gauge* waiting = nullptr);
  // Finishes the calls still waiting with UNAVAILABLE and stops the admission thread.
  ~UnsentAnswers();
  UnsentAnswers(const UnsentAnswers&) = delete;
  UnsentAnswers& operator=(const UnsentAnswers&) = delete;

  // Claims `bytes` for a call on `connection` due by `deadline`. RESOURCE_EXHAUSTED if that would
  // pass a bound, or the answer is predicted to be sent too late (the message names the bound,
  // its size and what is held, or the prediction; *refused_by says which), DEADLINE_EXCEEDED if
  // the deadline has passed; nothing is claimed then.
  absl::StatusOr<Claim> Take(absl::string_view connection, size_t bytes, Bound* refused_by,
                             absl::Time deadline = absl::InfiniteFuture());

  // What Admit did: refused the call (`status` not OK), admitted it now (`claim`), or queued it
  // (`waiting`: the `admitted` callback runs later).
  struct Admission {
    absl::Status status;
    bool waiting = false;
    Claim claim;
  };
  // Runs once for a call that waited: with its claim, or with DEADLINE_EXCEEDED (its deadline
  // passed while it waited), CANCELLED (`cancelled` was set) or UNAVAILABLE (the UnsentAnswers is
  // being destroyed); `waited_for` names the bound it waited on. Runs on the admission thread.
  using Admitted = absl::AnyInvocable<void(absl::StatusOr<Claim> claim, Bound waited_for)>;
  // As Take, but a call that would pass a bound waits for room instead of being refused (see
  // the top of this file), behind the calls already waiting on its connection. `cancelled` (may
  // be nullptr) must stay valid until `admitted` has run; call Wake() after setting it.
  Admission Admit(absl::string_view connection, size_t bytes, absl::Time deadline,
                  const std::atomic<bool>* cancelled, Admitted admitted, Bound* refused_by);
  // Has the admission thread look at the waiting calls now (one was cancelled).
  void Wake();

  Bounds bounds() const { return bounds_; }
  size_t held_bytes() const;
  size_t held_bytes(absl::string_view connection) const;
  // The rate (bytes a second) `connection`'s answers drain at, as learned; 0 if none is.
  double drain_rate(absl::string_view connection) const;
  size_t connections_for_test() const;
  size_t waiting_calls() const;

 private:
  // Admits the waiting calls that fit, in order, until destroyed.
  void RunAdmissions();
  // The bound a claim of `bytes` on a connection holding `connection_held` would pass (kNone:
  // none). Needs state_->mu.
  Bound FullBound(size_t connection_held, size_t bytes) const ABSL_NO_THREAD_SAFETY_ANALYSIS;
  // Claims `bytes` on `c`. Needs state_->mu.
  Claim ClaimLocked(Claim::Connection* c, size_t bytes,
                    absl::Time now) ABSL_NO_THREAD_SAFETY_ANALYSIS;

  const Bounds bounds_;
  std::shared_ptr<Claim::State> state_;
  std::thread admissions_;  // last: it starts once the rest is set
};

}  // namespace emb::service

#endif  // EMB_SERVICE_RPC_UNSENT_ANSWERS_H_
