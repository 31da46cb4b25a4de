// Sizes of memory as flags give them: "4294967296", "512M", "4G". Stateless.
#ifndef EMB_SERVICE_COMMON_BYTE_SIZE_H_
#define EMB_SERVICE_COMMON_BYTE_SIZE_H_

#include <cstddef>
#include <cstdint>
#include <limits>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace emb::service {

// The bytes `text` says: decimal digits, optionally followed by one binary unit, K, M, G or T
// (KiB, MiB, GiB, TiB; lower case too): "4G" is 4 x 2^30. INVALID_ARGUMENT naming `text` for
// anything else (a sign, a fraction, spaces, another unit) or a size past 2^63 - 1 bytes.
inline absl::StatusOr<size_t> ParseByteSize(absl::string_view text) {
  const auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(
        "'", text, "' is not a size: ", why,
        "; expected bytes, or a number with a unit K, M, G or T (KiB, MiB, GiB, TiB), e.g. 4G"));
  };
  size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') {
    ++digits;
  }
  if (digits == 0) {
    return bad(text.empty() ? "it is empty" : "it does not start with a digit");
  }
  int shift = 0;
  if (digits < text.size()) {
    if (digits + 1 != text.size()) {
      return bad(absl::StrCat("'", text.substr(digits), "' is not a unit"));
    }
    switch (text[digits]) {
      case 'K':
      case 'k':
        shift = 10;
        break;
      case 'M':
      case 'm':
        shift = 20;
        break;
      case 'G':
      case 'g':
        shift = 30;
        break;
      case 'T':
      case 't':
        shift = 40;
        break;
      default:
        return bad(absl::StrCat("'", text.substr(digits), "' is not a unit"));
    }
  }
  constexpr uint64_t kMax = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
  uint64_t value = 0;
  for (size_t i = 0; i < digits; ++i) {
    const auto digit = static_cast<uint64_t>(text[i] - '0');
    if (value > (kMax - digit) / 10) {
      return bad("it is over 2^63 - 1 bytes");
    }
    value = value * 10 + digit;
  }
  if (value > (kMax >> shift)) {
    return bad("it is over 2^63 - 1 bytes");
  }
  return static_cast<size_t>(value << shift);
}

}  // namespace emb::service

#endif  // EMB_SERVICE_COMMON_BYTE_SIZE_H_
