// ghz call data: a request written as JSON whose string values may hold ghz template actions,
// filled anew for every request. ghz parses the data as JSON first, so a templated int64 id is
// a quoted string ("ids": ["{{randomInt 0 100000}}"]), which proto3 JSON accepts for int64.
//
// Of ghz's template language (Go text/template with ghz's and sprig's functions) this knows the
// part our scenarios use: randomInt MIN MAX, uniform in [MIN, MAX) as in ghz, whose arguments are
// integers or a parenthesized randomInt. Anything else is refused when the template is parsed,
// never sent as literal text.
//
// Thread-safety: a parsed CallTemplate is immutable; Fill may run concurrently, each thread with
// its own generator.
#ifndef EMB_CLIENT_BENCH_CALL_DATA_H_
#define EMB_CLIENT_BENCH_CALL_DATA_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "client/bench/id_sampler.h"
#include "embedding/v1/embedding_service.pb.h"

namespace emb::client {

class CallTemplate {
 public:
  // Parses every "{{...}}" action of `text`. INVALID_ARGUMENT, naming the action, for an
  // unknown function or variable, a malformed or unclosed action, or MAX <= MIN.
  static absl::StatusOr<CallTemplate> Parse(absl::string_view text);

  // `text` with every action replaced by its value, drawn from `rng`. INVALID_ARGUMENT if a
  // nested randomInt makes MAX <= MIN.
  absl::StatusOr<std::string> Fill(BenchRng& rng) const;

  // Number of actions in the text.
  int num_actions() const;

  struct Expr;  // an integer, or randomInt of two Exprs

 private:
  struct Piece {
    std::string literal;                 // text before the action
    std::shared_ptr<const Expr> action;  // null for the trailing text
  };
  std::vector<Piece> pieces_;
};

// Parses proto3 JSON (templates already filled) into a LookUpRequest with protobuf's own JSON
// parser, as ghz does; INVALID_ARGUMENT with the parser's message otherwise.
absl::StatusOr<embedding::v1::LookUpRequest> ParseLookUpRequestJson(absl::string_view json);

// CallTemplate::Parse(json), Fill(rng), then ParseLookUpRequestJson.
absl::StatusOr<embedding::v1::LookUpRequest> FillCallData(absl::string_view json, BenchRng& rng);

}  // namespace emb::client

#endif  // EMB_CLIENT_BENCH_CALL_DATA_H_
