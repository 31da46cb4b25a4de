#include "bench/common/bench_flags.h"

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace emb::bench {

const char* Flags::Find(absl::string_view name) const {
  const std::string prefix = absl::StrCat("--", name, "=");
  for (int i = 1; i < argc_; ++i) {
    if (absl::StartsWith(argv_[i], prefix)) {
      return argv_[i] + prefix.size();
    }
  }
  return nullptr;
}

std::string Flags::Get(absl::string_view name, absl::string_view fallback) const {
  const char* text = Find(name);
  return text != nullptr ? text : std::string(fallback);
}

int64_t Flags::Int(absl::string_view name, int64_t fallback, int64_t min) {
  const char* text = Find(name);
  if (text == nullptr) {
    return fallback;
  }
  int64_t v = 0;
  if (!absl::SimpleAtoi(text, &v) || v < min) {
    Fail(name, text, absl::StrCat("an integer >= ", min));
    return fallback;
  }
  return v;
}

double Flags::Double(absl::string_view name, double fallback, double min) {
  const char* text = Find(name);
  if (text == nullptr) {
    return fallback;
  }
  double v = 0;
  // Written so that NaN fails too.
  if (!absl::SimpleAtod(text, &v) || !(v >= min)) {
    Fail(name, text, absl::StrCat("a number >= ", min));
    return fallback;
  }
  return v;
}

void Flags::Fail(absl::string_view name, absl::string_view text, absl::string_view wanted) {
  if (status_.ok()) {
    status_ = absl::InvalidArgumentError(absl::StrCat("--", name, "=", text, ": not ", wanted));
  }
}

}  // namespace emb::bench
