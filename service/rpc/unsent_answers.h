// UnsentAnswers: admission of LookUps by the memory their answers hold until gRPC has sent them,
// and by the time they would take to be sent.
//
// An answer's rows live in an AnswerBuffer from the moment its batch forms until gRPC has written
// the last byte to the socket (or dropped the call), and a client decides when that is: one that
// never reads, or never acknowledges the server's SETTINGS (so that gRPC 1.51 applies no stream
// limit to it), can make the server hold every answer it asks for. So each LookUp claims the
// bytes of its answer's block (AnswerBufferPool::BlockBytes) before it is queued, and keeps the
// claim until gRPC releases the answer; a LookUp whose claim would take the bytes held for its
// connection past `per_connection`, or those held for all connections past `total`, is refused
// with RESOURCE_EXHAUSTED. A connection is named by the peer gRPC gives its calls (for TCP, the
// client's address and port: one per connection).
//
// The bound that results: at most `total` bytes of answer blocks are handed out at any time, at
// most `per_connection` to one connection.
//
// Admission by deadline: gRPC shares a connection's bandwidth among its streams, so under
// overload every answer on a connection is sent slowly together, and past some backlog all of
// them miss their deadlines (issue 21, item 6: 4,096 callers with 250 ms deadlines received one
// answer in five the server sent). So each connection learns the rate its answers drain at: each
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
// frees an answer's slices whenever it is done).
#ifndef EMB_SERVICE_RPC_UNSENT_ANSWERS_H_
#define EMB_SERVICE_RPC_UNSENT_ANSWERS_H_

#include <cstddef>
#include <memory>
#include <string>

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
    double deadline_fraction = 0.5;
    // Bytes taken to wait past gRPC, in the kernel's socket buffers of a connection whose answers
    // queue (its client reads slower than the server sends), added to the bytes ahead when a
    // claim is judged: gRPC cannot see them. 0: none assumed.
    size_t socket_bytes = 0;
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

  // `held` (may be nullptr) is set to the bytes held, while this object lives. `clock` must
  // outlive every claim.
  UnsentAnswers(Bounds bounds, prometheus::Gauge* held, Clock* clock = Clock::Real());
  ~UnsentAnswers();
  UnsentAnswers(const UnsentAnswers&) = delete;
  UnsentAnswers& operator=(const UnsentAnswers&) = delete;

  // Claims `bytes` for a call on `connection` due by `deadline`. RESOURCE_EXHAUSTED if that would
  // pass a bound, or the answer is predicted to be sent too late (the message names the bound,
  // its size and what is held, or the prediction; *refused_by says which), DEADLINE_EXCEEDED if
  // the deadline has passed; nothing is claimed then.
  absl::StatusOr<Claim> Take(absl::string_view connection, size_t bytes, Bound* refused_by,
                             absl::Time deadline = absl::InfiniteFuture());

  Bounds bounds() const { return bounds_; }
  size_t held_bytes() const;
  size_t held_bytes(absl::string_view connection) const;
  // The rate (bytes a second) `connection`'s answers drain at, as learned; 0 if none is.
  double drain_rate(absl::string_view connection) const;
  size_t connections_for_test() const;

 private:
  const Bounds bounds_;
  std::shared_ptr<Claim::State> state_;
};

}  // namespace emb::service

#endif  // EMB_SERVICE_RPC_UNSENT_ANSWERS_H_
