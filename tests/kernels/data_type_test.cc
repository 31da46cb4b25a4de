// Tests the scalar conversions of kernels/data_type.h, exhaustively where the
// space is 2^16 and against the independent reference of gather_test_util.h
// elsewhere. Runs everywhere (no GPU).
#include "kernels/data_type.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>

#include "gtest/gtest.h"
#include "tests/kernels/gather_test_util.h"

namespace emb::data_type_test {
namespace {

using ::emb::testing::IsBf16Nan;
using ::emb::testing::IsHalfNan;
using ::emb::testing::RefBf16Value;
using ::emb::testing::RefFloatToBf16;
using ::emb::testing::RefFloatToHalf;
using ::emb::testing::RefHalfValue;

float Bits(uint32_t u) { return ::emb::testing::FloatFromBits(u); }
uint32_t BitsOf(float f) { return ::emb::testing::BitsOfFloat(f); }

TEST(Half, RoundTripsEveryNonNanPattern) {
  for (uint32_t p = 0; p <= 0xffff; ++p) {
    const auto h = static_cast<uint16_t>(p);
    if (IsHalfNan(h)) {
      continue;
    }
    const float f = HalfToFloat(h);
    if ((h & 0x7fff) == 0x7c00) {
      EXPECT_TRUE(std::isinf(f)) << std::hex << p;
    } else {
      EXPECT_EQ(static_cast<double>(f), RefHalfValue(h)) << std::hex << p;
    }
    EXPECT_EQ(FloatToHalf(f), h) << std::hex << p;
  }
}

TEST(Half, MidpointsTieToEven) {
  for (uint32_t p = 0; p < 0x7bff; ++p) {  // every pair of adjacent positive finite halves
    for (uint16_t sign : {0, 0x8000}) {
      const auto lo = static_cast<uint16_t>(p | sign);
      const auto hi = static_cast<uint16_t>((p + 1) | sign);
      const double mid_d = (RefHalfValue(lo) + RefHalfValue(hi)) / 2;
      const auto mid = static_cast<float>(mid_d);
      ASSERT_EQ(static_cast<double>(mid),
                mid_d);  // midpoints are exact in float32
      const uint16_t even = (p & 1u) == 0 ? lo : hi;
      EXPECT_EQ(FloatToHalf(mid), even) << std::hex << p;
      EXPECT_EQ(FloatToHalf(std::nextafter(mid, 0.0f)), lo) << std::hex << p;
      EXPECT_EQ(FloatToHalf(std::nextafter(mid, sign ? -INFINITY : INFINITY)), hi) << std::hex << p;
    }
  }
}

TEST(Half, OverflowGoesToInfinity) {
  EXPECT_EQ(FloatToHalf(65504.0f), 0x7bff);
  EXPECT_EQ(FloatToHalf(std::nextafter(65520.0f, 0.0f)), 0x7bff);
  EXPECT_EQ(FloatToHalf(65520.0f),
            0x7c00);  // the tie between 65504 (odd) and 2^16 goes up
  EXPECT_EQ(FloatToHalf(-65520.0f), 0xfc00);
  EXPECT_EQ(FloatToHalf(1e10f), 0x7c00);
  EXPECT_EQ(FloatToHalf(std::numeric_limits<float>::max()), 0x7c00);
  EXPECT_EQ(FloatToHalf(-std::numeric_limits<float>::max()), 0xfc00);
  EXPECT_EQ(FloatToHalf(INFINITY), 0x7c00);
  EXPECT_EQ(FloatToHalf(-INFINITY), 0xfc00);
}

TEST(Half, Subnormals) {
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -24)),
            0x0001);  // smallest subnormal half
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -25)),
            0x0000);  // tie between 0 and 2^-24: even is 0
  EXPECT_EQ(FloatToHalf(-std::ldexp(1.0f, -25)), 0x8000);
  EXPECT_EQ(FloatToHalf(std::nextafter(std::ldexp(1.0f, -25), 1.0f)), 0x0001);
  EXPECT_EQ(FloatToHalf(std::ldexp(3.0f, -25)),
            0x0002);  // 1.5 * 2^-24: tie, to even 2
  EXPECT_EQ(FloatToHalf(std::ldexp(5.0f, -25)),
            0x0002);                                         // 2.5 * 2^-24: tie, to even 2
  EXPECT_EQ(FloatToHalf(std::ldexp(1023.0f, -24)), 0x03ff);  // largest subnormal
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -14)), 0x0400);     // smallest normal
  EXPECT_EQ(FloatToHalf(std::ldexp(2047.0f, -25)),
            0x0400);  // rounds up into the normals
  EXPECT_EQ(FloatToHalf(std::numeric_limits<float>::denorm_min()), 0x0000);
  EXPECT_EQ(FloatToHalf(-std::numeric_limits<float>::denorm_min()), 0x8000);
  EXPECT_EQ(HalfToFloat(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(HalfToFloat(0x83ff), -std::ldexp(1023.0f, -24));
}

TEST(Half, NanStaysNan) {
  for (uint32_t u : {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0xff800001u, 0x7fffffffu, 0x7f802000u,
                     0x7fbfffffu}) {
    const uint16_t h = FloatToHalf(Bits(u));
    EXPECT_TRUE(IsHalfNan(h)) << std::hex << u << " -> " << h;
    EXPECT_EQ(h & 0x8000, (u >> 16) & 0x8000) << std::hex << u;
    EXPECT_NE(h & 0x0200, 0) << "quiet bit, " << std::hex << u;
  }
  for (uint32_t p = 0; p <= 0xffff; ++p) {
    const auto h = static_cast<uint16_t>(p);
    if (IsHalfNan(h)) {
      EXPECT_TRUE(std::isnan(HalfToFloat(h))) << std::hex << p;
      EXPECT_TRUE(IsHalfNan(FloatToHalf(HalfToFloat(h)))) << std::hex << p;
    }
  }
}

TEST(Half, MatchesReferenceOnRandomFloats) {
  std::mt19937 rng(1234);
  for (int i = 0; i < 2'000'000; ++i) {
    uint32_t u = rng();
    if (i % 2 == 0) {  // concentrate on the half range: exponents 2^-27 .. 2^17
      u = (u & 0x807fffffu) | ((100u + rng() % 45u) << 23);
    }
    const float f = Bits(u);
    if (std::isnan(f)) {
      continue;
    }
    ASSERT_EQ(FloatToHalf(f), RefFloatToHalf(f)) << std::hex << u;
  }
}

TEST(BFloat16, RoundTripsEveryNonNanPattern) {
  for (uint32_t p = 0; p <= 0xffff; ++p) {
    const auto b = static_cast<uint16_t>(p);
    if (IsBf16Nan(b)) {
      continue;
    }
    const float f = BFloat16ToFloat(b);
    if ((b & 0x7fff) == 0x7f80) {
      EXPECT_TRUE(std::isinf(f)) << std::hex << p;
    } else {
      EXPECT_EQ(static_cast<double>(f), RefBf16Value(b)) << std::hex << p;
    }
    EXPECT_EQ(FloatToBFloat16(f), b) << std::hex << p;
  }
}

TEST(BFloat16, MidpointsTieToEven) {
  for (uint32_t p = 0; p < 0x7f7f; ++p) {
    for (uint32_t sign : {0u, 0x8000u}) {
      const uint32_t mid_bits = ((p | sign) << 16) | 0x8000u;  // halfway to the next pattern
      const float mid = Bits(mid_bits);
      const auto lo = static_cast<uint16_t>(p | sign);
      const auto hi = static_cast<uint16_t>((p + 1) | sign);
      EXPECT_EQ(FloatToBFloat16(mid), (p & 1u) == 0 ? lo : hi) << std::hex << p;
      EXPECT_EQ(FloatToBFloat16(Bits(mid_bits - 1)), lo) << std::hex << p;
      EXPECT_EQ(FloatToBFloat16(Bits(mid_bits + 1)), hi) << std::hex << p;
    }
  }
}

TEST(BFloat16, OverflowGoesToInfinity) {
  EXPECT_EQ(FloatToBFloat16(Bits(0x7f7f0000u)),
            0x7f7f);  // largest finite bfloat16
  EXPECT_EQ(FloatToBFloat16(Bits(0x7f7f7fffu)), 0x7f7f);
  EXPECT_EQ(FloatToBFloat16(Bits(0x7f7f8000u)),
            0x7f80);  // tie with odd 0x7f7f: up, to inf
  EXPECT_EQ(FloatToBFloat16(std::numeric_limits<float>::max()), 0x7f80);
  EXPECT_EQ(FloatToBFloat16(-std::numeric_limits<float>::max()), 0xff80);
  EXPECT_EQ(FloatToBFloat16(INFINITY), 0x7f80);
  EXPECT_EQ(FloatToBFloat16(-INFINITY), 0xff80);
}

TEST(BFloat16, Subnormals) {
  EXPECT_EQ(FloatToBFloat16(Bits(0x00010000u)),
            0x0001);                                      // smallest subnormal bfloat16
  EXPECT_EQ(FloatToBFloat16(Bits(0x00008000u)), 0x0000);  // tie with 0: even
  EXPECT_EQ(FloatToBFloat16(Bits(0x00018000u)), 0x0002);  // tie 1|2: even
  EXPECT_EQ(FloatToBFloat16(Bits(0x00008001u)), 0x0001);
  EXPECT_EQ(FloatToBFloat16(Bits(0x007fffffu)),
            0x0080);  // largest float subnormal rounds up
  EXPECT_EQ(FloatToBFloat16(Bits(0x80000001u)), 0x8000);
  EXPECT_EQ(BFloat16ToFloat(0x0001), Bits(0x00010000u));
}

TEST(BFloat16, NanStaysNan) {
  for (uint32_t u : {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0xff800001u, 0x7fffffffu, 0x7f810000u,
                     0x7fbfffffu}) {
    const uint16_t b = FloatToBFloat16(Bits(u));
    EXPECT_TRUE(IsBf16Nan(b)) << std::hex << u << " -> " << b;
    EXPECT_EQ(b & 0x8000, (u >> 16) & 0x8000) << std::hex << u;
    EXPECT_NE(b & 0x0040, 0) << "quiet bit, " << std::hex << u;
  }
  for (uint32_t p = 0; p <= 0xffff; ++p) {
    const auto b = static_cast<uint16_t>(p);
    if (IsBf16Nan(b)) {
      EXPECT_TRUE(std::isnan(BFloat16ToFloat(b))) << std::hex << p;
    }
  }
}

TEST(BFloat16, MatchesReferenceOnRandomFloats) {
  std::mt19937 rng(99);
  for (int i = 0; i < 2'000'000; ++i) {
    const uint32_t u = rng();
    const float f = Bits(u);
    if (std::isnan(f)) {
      continue;
    }
    ASSERT_EQ(FloatToBFloat16(f), RefFloatToBf16(f)) << std::hex << u;
  }
}

TEST(DataType, ElementSizesAndNames) {
  EXPECT_EQ(ElementSize(DataType::kFloat32), 4u);
  EXPECT_EQ(ElementSize(DataType::kFloat16), 2u);
  EXPECT_EQ(ElementSize(DataType::kBFloat16), 2u);
  for (DataType t : {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16}) {
    DataType parsed{};
    ASSERT_TRUE(ParseDataType(DataTypeName(t), &parsed));
    EXPECT_EQ(parsed, t);
  }
  DataType parsed{};
  EXPECT_FALSE(ParseDataType("float64", &parsed));
}

TEST(DataType, LoadAndStoreConvert) {
  uint16_t h[2] = {};
  StoreFromFloat(h, DataType::kFloat16, 1, 1.5f);
  EXPECT_EQ(h[1], 0x3e00);
  EXPECT_EQ(LoadAsFloat(h, DataType::kFloat16, 1), 1.5f);
  uint16_t b[2] = {};
  StoreFromFloat(b, DataType::kBFloat16, 0, -2.0f);
  EXPECT_EQ(b[0], 0xc000);
  EXPECT_EQ(LoadAsFloat(b, DataType::kBFloat16, 0), -2.0f);
  float f[2] = {};
  StoreFromFloat(f, DataType::kFloat32, 1, 3.25f);
  EXPECT_EQ(LoadAsFloat(f, DataType::kFloat32, 1), 3.25f);
  EXPECT_EQ(BitsOf(f[0]), 0u);
}

}  // namespace
}  // namespace emb::data_type_test
