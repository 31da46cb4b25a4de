// Test-only helpers for the gather tests: reference conversions written
// independently of kernels/data_type.h (values decoded from their fields with
// ldexp, round-to-nearest-even found by binary search over the monotonic
// positive bit patterns of the narrow type; slow, for checking only), and
// random tables that exercise every rounding case and never hold a zero.
#ifndef EMB_TESTS_KERNELS_GATHER_TEST_UTIL_H_
#define EMB_TESTS_KERNELS_GATHER_TEST_UTIL_H_

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/data_type.h"

namespace emb::testing {

inline float FloatFromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

inline uint32_t BitsOfFloat(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}

inline bool IsHalfNan(uint16_t h) { return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0; }
inline bool IsBf16Nan(uint16_t b) { return (b & 0x7f80u) == 0x7f80u && (b & 0x7fu) != 0; }

// The value of a non-NaN half / bfloat16 pattern (infinities give +-inf).
inline double RefHalfValue(uint16_t h) {
  const int exp = (h >> 10) & 0x1f;
  const int mant = h & 0x3ff;
  double v;
  if (exp == 0x1f) {
    v = INFINITY;
  } else {
    v = exp == 0 ? std::ldexp(mant, -24) : std::ldexp(1024 + mant, exp - 25);
  }
  return (h & 0x8000) ? -v : v;
}
inline double RefBf16Value(uint16_t b) {
  const int exp = (b >> 7) & 0xff;
  const int mant = b & 0x7f;
  double v;
  if (exp == 0xff) {
    v = INFINITY;
  } else {
    v = exp == 0 ? std::ldexp(mant, -133) : std::ldexp(128 + mant, exp - 134);
  }
  return (b & 0x8000) ? -v : v;
}

// Round-to-nearest-even of a non-NaN float into a 16-bit type whose positive
// finite patterns run 0..max_finite in increasing value, with infinity at
// max_finite + 1, treated as the next value `inf_as` for rounding (so overflow
// follows the same tie rule, as IEEE 754 specifies).
template <typename ValueFn>
uint16_t RefRound(float f, uint16_t max_finite, double inf_as, ValueFn value) {
  const double a = std::fabs(static_cast<double>(f));
  const uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  auto val = [&](uint32_t p) { return p > max_finite ? inf_as : value(static_cast<uint16_t>(p)); };
  if (a >= inf_as) {
    return static_cast<uint16_t>(sign | (max_finite + 1u));
  }
  uint32_t lo = 0;                // val(lo) <= a
  uint32_t hi = max_finite + 1u;  // val(hi) > a
  while (hi - lo > 1) {
    const uint32_t mid = (lo + hi) / 2;
    if (val(mid) <= a) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  const double below = a - val(lo);
  const double above = val(hi) - a;
  uint32_t r;
  if (below < above) {
    r = lo;
  } else if (above < below) {
    r = hi;
  } else {
    r = (lo & 1u) == 0 ? lo : hi;
  }
  return static_cast<uint16_t>(sign | r);
}

inline uint16_t RefFloatToHalf(float f) { return RefRound(f, 0x7bff, 65536.0, RefHalfValue); }
inline uint16_t RefFloatToBf16(float f) {
  return RefRound(f, 0x7f7f, std::ldexp(1.0, 128), RefBf16Value);
}

// Element i of an array of the value type `t`, as a double; NaN for any NaN pattern (and for a
// quantized type, whose rows are not arrays of elements).
inline double RefLoad(const void* p, DataType t, size_t i) {
  switch (t) {
    case DataType::kFloat32: {
      uint32_t u;
      std::memcpy(&u, static_cast<const std::byte*>(p) + 4 * i, 4);
      return static_cast<double>(FloatFromBits(u));
    }
    case DataType::kFloat16: {
      uint16_t h;
      std::memcpy(&h, static_cast<const std::byte*>(p) + 2 * i, 2);
      return IsHalfNan(h) ? NAN : RefHalfValue(h);
    }
    case DataType::kBFloat16: {
      uint16_t b;
      std::memcpy(&b, static_cast<const std::byte*>(p) + 2 * i, 2);
      return IsBf16Nan(b) ? NAN : RefBf16Value(b);
    }
    case DataType::kInt8Rowwise:  // rows, not arrays of elements: see quantize_test.cc
    case DataType::kInt4Rowwise:
      break;
  }
  return NAN;
}

// `count` random elements of `t`, as bytes, never +-0. float32 tables mix plain
// values in
// [-2, 2], arbitrary bit patterns (NaN, infinities, subnormals, huge), exact
// half and bfloat16 midpoints (ties), values around the half overflow threshold
// and in the half subnormal range, and float32 subnormals. 16-bit tables are
// arbitrary bit patterns (NaN and infinities included).
inline std::vector<std::byte> RandomTable(DataType t, size_t count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::byte> bytes(count * ElementSize(t));
  if (t != DataType::kFloat32) {
    const uint16_t one = t == DataType::kFloat16 ? 0x3c00 : 0x3f80;
    for (size_t i = 0; i < count; ++i) {
      auto h = static_cast<uint16_t>(rng());
      if ((h & 0x7fff) == 0) {
        h = one;
      }
      std::memcpy(bytes.data() + 2 * i, &h, 2);
    }
    return bytes;
  }
  std::uniform_real_distribution<float> plain(-2.0f, 2.0f);
  for (size_t i = 0; i < count; ++i) {
    float f = 0;
    const uint32_t r = rng();
    const uint32_t sign = (rng() & 1u) << 31;
    switch (r % 8) {
      case 0:
      case 1:
        f = plain(rng);
        break;
      case 2:  // anything, NaN payloads and infinities included
        f = FloatFromBits(rng());
        break;
      case 3: {  // exactly halfway between two adjacent finite halves
        const auto h = static_cast<uint16_t>(rng() % 0x7bff);
        f = static_cast<float>((RefHalfValue(h) + RefHalfValue(static_cast<uint16_t>(h + 1))) / 2);
        f = FloatFromBits(BitsOfFloat(f) | sign);
        break;
      }
      case 4:  // exactly halfway between two adjacent bfloat16s (or a bfloat16 and
               // inf)
        f = FloatFromBits(sign | ((rng() % 0x7f80u) << 16) | 0x8000u);
        break;
      case 5:  // around the half overflow threshold 65520
        f = FloatFromBits(BitsOfFloat(65504.0f + static_cast<float>(rng() % 32)) | sign);
        break;
      case 6:  // the half subnormal range and just below it: 2^-27 .. 2^-14
        f = FloatFromBits(sign | ((100u + rng() % 14u) << 23) | (rng() & 0x7fffffu));
        break;
      default:  // float32 subnormals
        f = FloatFromBits(sign | (rng() & 0x7fffffu));
        break;
    }
    if (f == 0.0f) {
      f = 1.0f;
    }
    std::memcpy(bytes.data() + 4 * i, &f, 4);
  }
  return bytes;
}

}  // namespace emb::testing

#endif  // EMB_TESTS_KERNELS_GATHER_TEST_UTIL_H_
