// UnsentAnswers: admission of LookUps by the memory their answers hold until gRPC has sent them.
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
// most `per_connection` to one connection. Thread-safe; a Claim may be released on any thread,
// also after the UnsentAnswers is gone (gRPC frees an answer's slices whenever it is done).
#ifndef EMB_SERVICE_RPC_UNSENT_ANSWERS_H_
#define EMB_SERVICE_RPC_UNSENT_ANSWERS_H_

#include <cstddef>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "prometheus/gauge.h"

namespace emb::service {

class UnsentAnswers {
 public:
  struct Bounds {
    size_t total = size_t{2} << 30;
    size_t per_connection = size_t{256} << 20;
  };

  // Which bound refused a claim (Claim()'s `refused_by`).
  enum class Bound { kNone, kConnection, kTotal };

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
    Claim(std::shared_ptr<State> state, Connection* connection, size_t bytes);
    void Release();

    std::shared_ptr<State> state_;
    Connection* connection_ = nullptr;
    size_t bytes_ = 0;
  };

  // `held` (may be nullptr) is set to the bytes held, while this object lives.
  UnsentAnswers(Bounds bounds, prometheus::Gauge* held);
  ~UnsentAnswers();
  UnsentAnswers(const UnsentAnswers&) = delete;
  UnsentAnswers& operator=(const UnsentAnswers&) = delete;

  // Claims `bytes` for a call on `connection`. RESOURCE_EXHAUSTED if that would pass a bound (the
  // message names the bound, its size and what is held; *refused_by says which); nothing is
  // claimed then.
  absl::StatusOr<Claim> Take(absl::string_view connection, size_t bytes, Bound* refused_by);

  Bounds bounds() const { return bounds_; }
  size_t held_bytes() const;
  size_t held_bytes(absl::string_view connection) const;
  size_t connections_for_test() const;

 private:
  const Bounds bounds_;
  std::shared_ptr<Claim::State> state_;
};

}  // namespace emb::service

#endif  // EMB_SERVICE_RPC_UNSENT_ANSWERS_H_
