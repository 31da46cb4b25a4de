#include "client/bench/call_data.h"

#include <google/protobuf/util/json_util.h>

#include <cctype>
#include <random>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace emb::client {

struct CallTemplate::Expr {
  int64_t value = 0;  // when !is_call
  bool is_call = false;
  std::unique_ptr<Expr> min;
  std::unique_ptr<Expr> max;
};

namespace {

// Splits an action's text into "(", ")" and words.
std::vector<std::string> Tokenize(absl::string_view text) {
  std::vector<std::string> tokens;
  size_t i = 0;
  while (i < text.size()) {
    const char c = text[i];
    if (absl::ascii_isspace(static_cast<unsigned char>(c))) {
      ++i;
    } else if (c == '(' || c == ')') {
      tokens.emplace_back(1, c);
      ++i;
    } else {
      size_t j = i;
      while (j < text.size() && !absl::ascii_isspace(static_cast<unsigned char>(text[j])) &&
             text[j] != '(' && text[j] != ')') {
        ++j;
      }
      tokens.emplace_back(text.substr(i, j - i));
      i = j;
    }
  }
  return tokens;
}

class ActionParser {
 public:
  explicit ActionParser(absl::string_view action) : action_(action), tokens_(Tokenize(action)) {}

  absl::StatusOr<std::unique_ptr<CallTemplate::Expr>> ParseAction() {
    absl::StatusOr<std::unique_ptr<CallTemplate::Expr>> e = ParseTop();
    if (e.ok() && pos_ != tokens_.size()) {
      return Error(absl::StrCat("unexpected \"", tokens_[pos_], "\""));
    }
    return e;
  }

 private:
  // A call, an integer, or either in parentheses.
  absl::StatusOr<std::unique_ptr<CallTemplate::Expr>> ParseTop() {
    if (pos_ < tokens_.size() && tokens_[pos_] == "randomInt") {
      return ParseCall();
    }
    return ParseArg();
  }

  absl::StatusOr<std::unique_ptr<CallTemplate::Expr>> ParseArg() {
    if (pos_ >= tokens_.size()) {
      return Error("missing argument");
    }
    const std::string& t = tokens_[pos_];
    if (t == "(") {
      ++pos_;
      absl::StatusOr<std::unique_ptr<CallTemplate::Expr>> inner = ParseTop();
      if (!inner.ok()) {
        return inner;
      }
      if (pos_ >= tokens_.size() || tokens_[pos_] != ")") {
        return Error("missing \")\"");
      }
      ++pos_;
      return inner;
    }
    auto e = std::make_unique<CallTemplate::Expr>();
    if (!absl::SimpleAtoi(t, &e->value)) {
      return Error(absl::StrCat("\"", t,
                                "\" is not supported (known: randomInt MIN MAX, with integer "
                                "or (randomInt ...) arguments)"));
    }
    ++pos_;
    return e;
  }

  absl::StatusOr<std::unique_ptr<CallTemplate::Expr>> ParseCall() {
    ++pos_;  // randomInt
    auto e = std::make_unique<CallTemplate::Expr>();
    e->is_call = true;
    for (std::unique_ptr<CallTemplate::Expr>* arg : {&e->min, &e->max}) {
      absl::StatusOr<std::unique_ptr<CallTemplate::Expr>> a = ParseArg();
      if (!a.ok()) {
        return a;
      }
      *arg = *std::move(a);
    }
    if (!e->min->is_call && e->min->value < 0) {
      return Error("randomInt's MIN must be >= 0");
    }
    if (!e->min->is_call && !e->max->is_call && e->max->value <= e->min->value) {
      return Error("randomInt needs MAX > MIN");
    }
    return e;
  }

  absl::Status Error(absl::string_view what) const {
    return absl::InvalidArgumentError(
        absl::StrCat("ghz template action {{", action_, "}}: ", what));
  }

  absl::string_view action_;
  std::vector<std::string> tokens_;
  size_t pos_ = 0;
};

absl::StatusOr<int64_t> Evaluate(const CallTemplate::Expr& e, BenchRng& rng) {
  if (!e.is_call) {
    return e.value;
  }
  absl::StatusOr<int64_t> min = Evaluate(*e.min, rng);
  if (!min.ok()) {
    return min;
  }
  absl::StatusOr<int64_t> max = Evaluate(*e.max, rng);
  if (!max.ok()) {
    return max;
  }
  if (*max <= *min) {
    return absl::InvalidArgumentError(
        absl::StrCat("randomInt ", *min, " ", *max, ": needs MAX > MIN"));
  }
  return std::uniform_int_distribution<int64_t>(*min, *max - 1)(rng);
}

}  // namespace

absl::StatusOr<CallTemplate> CallTemplate::Parse(absl::string_view text) {
  CallTemplate t;
  size_t pos = 0;
  while (true) {
    const size_t open = text.find("{{", pos);
    if (open == absl::string_view::npos) {
      if (text.find("}}", pos) != absl::string_view::npos) {
        return absl::InvalidArgumentError("ghz template: \"}}\" without \"{{\"");
      }
      t.pieces_.push_back({std::string(text.substr(pos)), nullptr});
      return t;
    }
    const size_t close = text.find("}}", open + 2);
    if (close == absl::string_view::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("ghz template: unclosed action at byte ", open));
    }
    absl::StatusOr<std::unique_ptr<Expr>> action =
        ActionParser(text.substr(open + 2, close - open - 2)).ParseAction();
    if (!action.ok()) {
      return action.status();
    }
    t.pieces_.push_back({std::string(text.substr(pos, open - pos)), *std::move(action)});
    pos = close + 2;
  }
}

absl::StatusOr<std::string> CallTemplate::Fill(BenchRng& rng) const {
  std::string out;
  for (const Piece& p : pieces_) {
    out += p.literal;
    if (p.action != nullptr) {
      absl::StatusOr<int64_t> v = Evaluate(*p.action, rng);
      if (!v.ok()) {
        return v.status();
      }
      absl::StrAppend(&out, *v);
    }
  }
  return out;
}

int CallTemplate::num_actions() const {
  return static_cast<int>(pieces_.size()) - 1;  // the trailing piece has none
}

absl::StatusOr<embedding::v1::LookUpRequest> ParseLookUpRequestJson(absl::string_view json) {
  embedding::v1::LookUpRequest request;
  const google::protobuf::util::Status s =
      google::protobuf::util::JsonStringToMessage(std::string(json), &request);
  if (!s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("call data is not an embedding.v1.LookUpRequest: ", s.ToString()));
  }
  return request;
}

absl::StatusOr<embedding::v1::LookUpRequest> FillCallData(absl::string_view json, BenchRng& rng) {
  absl::StatusOr<CallTemplate> t = CallTemplate::Parse(json);
  if (!t.ok()) {
    return t.status();
  }
  absl::StatusOr<std::string> filled = t->Fill(rng);
  if (!filled.ok()) {
    return filled.status();
  }
  return ParseLookUpRequestJson(*filled);
}

}  // namespace emb::client
