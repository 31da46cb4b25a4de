// Random tables of every table type for the kernel tests that compare the GPU with the CPU bit for
// bit: values never zero, NaN or infinite (NaN payloads would differ between host and device
// without either being wrong), and sums that cancel (-0.0 against +0.0) rare.
#ifndef EMB_TESTS_KERNELS_RANDOM_TABLE_H_
#define EMB_TESTS_KERNELS_RANDOM_TABLE_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "kernels/data_type.h"
#include "kernels/quantize_rows.h"

namespace emb::testing {

// `rows` x `dim` random values of `t`, never zero, NaN or infinite. float32: every mantissa, with
// exponents from 2^-24 to 2^11 and a few subnormals; float16: every finite pattern but zero;
// bfloat16: exponents from 2^-30 to 2^30 and a few subnormals. Quantized tables are EncodeRows of
// random float32 rows of every kind: narrow and wide, with and without a large offset, negative,
// constant.
inline std::vector<std::byte> RandomTable(DataType t, int64_t rows, int64_t dim, uint32_t seed) {
  std::mt19937 rng(seed);
  const auto count = static_cast<size_t>(rows * dim);
  if (t == DataType::kFloat32) {
    std::vector<float> v(count);
    for (float& x : v) {
      const uint32_t sign = (rng() & 1u) << 31;
      const uint32_t mant = rng() & 0x7fffffu;
      const uint32_t exp = rng() % 32 == 0 ? 0 : 103 + rng() % 36;
      x = BitsToFloat(sign | (exp << 23) | (exp == 0 && mant == 0 ? 1u : mant));
    }
    std::vector<std::byte> bytes(count * 4);
    std::memcpy(bytes.data(), v.data(), bytes.size());
    return bytes;
  }
  if (t == DataType::kFloat16 || t == DataType::kBFloat16) {
    std::vector<uint16_t> v(count);
    for (uint16_t& h : v) {
      const auto sign = static_cast<uint16_t>((rng() & 1u) << 15);
      if (t == DataType::kFloat16) {
        const auto exp = static_cast<uint16_t>(rng() % 31);  // 0x1f: inf / NaN
        const auto mant = static_cast<uint16_t>(rng() & 0x3ffu);
        h = static_cast<uint16_t>(sign | (exp << 10) | (exp == 0 && mant == 0 ? 1 : mant));
      } else {
        const auto exp = static_cast<uint16_t>(rng() % 32 == 0 ? 0 : 97 + rng() % 61);
        const auto mant = static_cast<uint16_t>(rng() & 0x7fu);
        h = static_cast<uint16_t>(sign | (exp << 7) | (exp == 0 && mant == 0 ? 1 : mant));
      }
    }
    std::vector<std::byte> bytes(count * 2);
    std::memcpy(bytes.data(), v.data(), bytes.size());
    return bytes;
  }
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  std::vector<float> v(count);
  for (int64_t r = 0; r < rows; ++r) {
    const float width = std::array<float, 5>{1.0f, 1e-3f, 50.0f, 3000.0f, 0.2f}[r % 5];
    const float offset = std::array<float, 3>{0.0f, 1000.0f, -20.0f}[r % 3];
    const bool constant = r % 11 == 4;
    const float c = unit(rng);
    for (int64_t j = 0; j < dim; ++j) {
      float x = (constant ? c : unit(rng)) * width + offset;
      v[static_cast<size_t>(r * dim + j)] = x == 0.0f ? 0.125f : x;
    }
  }
  std::vector<std::byte> bytes(static_cast<size_t>(rows) * RowBytes(t, dim));
  const absl::Status s = EncodeRows(reinterpret_cast<const std::byte*>(v.data()),
                                    DataType::kFloat32, rows, dim, t, bytes.data());
  EXPECT_TRUE(s.ok()) << s;
  return bytes;
}

}  // namespace emb::testing

#endif  // EMB_TESTS_KERNELS_RANDOM_TABLE_H_
