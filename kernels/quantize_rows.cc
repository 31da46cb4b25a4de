#include "kernels/quantize_rows.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/quantize.h"

namespace emb {
namespace {

void StoreLittleEndian(uint32_t v, int bytes, std::byte* p) {
  for (int i = 0; i < bytes; ++i) {
    p[i] = static_cast<std::byte>((v >> (8 * i)) & 0xffu);
  }
}

// The largest finite float16.
constexpr float kHalfMax = 65504.0f;

// The float16 nearest `v` at or below it (v within float16's range).
uint16_t HalfAtOrBelow(float v) {
  uint16_t h = FloatToHalf(v);
  if (HalfToFloat(h) > v) {
    // One step towards minus infinity: the magnitude grows for a negative value, shrinks for a
    // positive one (+0 steps to the smallest negative subnormal).
    if ((h & 0x7fffu) == 0) {
      h = 0x8001u;
    } else {
      h = (h & 0x8000u) != 0 ? static_cast<uint16_t>(h + 1) : static_cast<uint16_t>(h - 1);
    }
  }
  return h;
}

// The smallest float16 at or above v >= 0 (v within float16's range).
uint16_t HalfAtOrAbove(float v) {
  uint16_t h = FloatToHalf(v);
  if (HalfToFloat(h) < v) {
    ++h;  // non-negative: one step up in magnitude
  }
  return h;
}

// The type a row's scale and bias are stored in: float16 (int4) or float32 (int8).
struct ScaleType {
  bool half;

  // v as stored (rounded to nearest even), as float.
  float Nearest(double v) const {
    const auto f = static_cast<float>(v);
    return half ? HalfToFloat(FloatToHalf(f)) : f;
  }
  // The largest stored value at or below v >= 0 (v within the type's range).
  float AtOrBelow(double v) const {
    auto f = static_cast<float>(v);
    if (double{f} > v) {
      f = std::nextafter(f, -INFINITY);
    }
    if (half) {
      f = HalfToFloat(HalfAtOrBelow(f));
    }
    return f;
  }
};

// The level of x: the one in [0, levels) whose dequantized value (DequantizeValue, as the gathers
// compute it) is nearest to x. The quotient's rounding may pick a neighbour of the nearest, so
// both neighbours are compared.
uint32_t Level(float x, float bias, float scale, uint32_t levels) {
  if (scale <= 0) {
    return 0;
  }
  const float top = static_cast<float>(levels - 1);
  const float q = std::clamp(std::nearbyint((x - bias) / scale), 0.0f, top);
  float best = q;
  double best_error = std::fabs(double{DequantizeValue(q, scale, bias)} - x);
  for (const float n : {q - 1, q + 1}) {
    if (n < 0 || n > top) {
      continue;
    }
    if (const double e = std::fabs(double{DequantizeValue(n, scale, bias)} - x); e < best_error) {
      best = n;
      best_error = e;
    }
  }
  return static_cast<uint32_t>(best);
}

// A scale at or below the row's step (hi - lo) / (levels - 1) and a bias that centre the levels
// on [lo, hi]: every element is then within half a step of its original. Checks the ends as
// DequantizeValue computes them (the first level at most half a step above lo, the last at most
// half a step below hi); false where the stored type cannot hold such a pair (a float16 bias too
// coarse for a range this narrow at this magnitude, a constant row, float16's subnormal scales).
bool CenteredScale(float lo, float hi, uint32_t levels, ScaleType type, float* scale, float* bias) {
  const double step = (double{hi} - lo) / (levels - 1);
  const float s = type.AtOrBelow(step);
  if (!(s > 0) || !std::isfinite(s)) {
    return false;
  }
  const float b = type.Nearest((double{lo} + hi - double{s} * (levels - 1)) / 2);
  if (!std::isfinite(b) || double{b} > lo + step / 2) {
    return false;
  }
  const float top = DequantizeValue(static_cast<float>(levels - 1), s, b);
  if (!std::isfinite(top) || double{top} < hi - step / 2) {
    return false;
  }
  *scale = s;
  *bias = b;
  return true;
}

}  // namespace

absl::Status QuantizeRow(const float* values, int64_t dim, DataType t, std::byte* out) {
  float lo = values[0];
  float hi = values[0];
  for (int64_t j = 0; j < dim; ++j) {
    if (!std::isfinite(values[j])) {
      return absl::InvalidArgumentError(
          absl::StrCat("element ", j, " is ", values[j], ": only finite values can be quantized"));
    }
    lo = std::min(lo, values[j]);
    hi = std::max(hi, values[j]);
  }
  const uint32_t levels = t == DataType::kInt8Rowwise ? 256 : 16;
  float bias = lo;
  float scale = 0;
  if (t == DataType::kInt4Rowwise) {
    if (lo < -kHalfMax || hi > kHalfMax || double{hi} - lo > double{kHalfMax} * (levels - 1)) {
      return absl::InvalidArgumentError(
          absl::StrCat("values from ", lo, " to ", hi,
                       " exceed float16's range (int4_rowwise keeps its scale "
                       "and bias in float16)"));
    }
    if (!CenteredScale(lo, hi, levels, ScaleType{true}, &scale, &bias)) {
      // The bias at or below the smallest value and the scale rounded up until the top level
      // reaches the largest, as DequantizeValue computes it: within half of this (larger) scale.
      const uint16_t bias_half = HalfAtOrBelow(lo);
      bias = HalfToFloat(bias_half);
      uint16_t scale_half = HalfAtOrAbove((hi - bias) / static_cast<float>(levels - 1));
      while (HalfToFloat(scale_half) > 0 &&
             DequantizeValue(static_cast<float>(levels - 1), HalfToFloat(scale_half), bias) < hi) {
        ++scale_half;
      }
      if (HalfToFloat(scale_half) == 0 && bias < hi) {
        scale_half = 1;  // the smallest subnormal: a range too small for any other scale
      }
      scale = HalfToFloat(scale_half);
    }
    // Both are float16 values (CenteredScale's by construction), stored exactly.
    StoreLittleEndian(FloatToHalf(bias), 2, out + (dim + 1) / 2 + 2);
    StoreLittleEndian(FloatToHalf(scale), 2, out + (dim + 1) / 2);
  } else {
    if (!std::isfinite((hi - lo) / static_cast<float>(levels - 1))) {
      // hi - lo overflows float32: scale * 0 would be NaN
      return absl::InvalidArgumentError(absl::StrCat(
          "values from ", lo, " to ", hi, " span more than float32's range (int8_rowwise)"));
    }
    if (!CenteredScale(lo, hi, levels, ScaleType{false}, &scale, &bias)) {
      bias = lo;
      scale = (hi - lo) / static_cast<float>(levels - 1);
      while (scale > 0 && DequantizeValue(static_cast<float>(levels - 1), scale, bias) < hi) {
        scale = std::nextafter(scale, INFINITY);
      }
    }
    StoreLittleEndian(FloatBits(scale), 4, out + dim);
    StoreLittleEndian(FloatBits(bias), 4, out + dim + 4);
  }
  if (t == DataType::kInt8Rowwise) {
    for (int64_t j = 0; j < dim; ++j) {
      out[j] = static_cast<std::byte>(Level(values[j], bias, scale, levels));
    }
    return absl::OkStatus();
  }
  std::fill(out, out + (dim + 1) / 2, std::byte{0});
  for (int64_t j = 0; j < dim; ++j) {
    out[j / 2] |= static_cast<std::byte>(Level(values[j], bias, scale, levels) << (4 * (j & 1)));
  }
  return absl::OkStatus();
}

absl::Status EncodeRows(const std::byte* in, DataType in_type, int64_t rows, int64_t dim,
                        DataType table_type, std::byte* out, int64_t first_row) {
  const size_t in_row = RowBytes(in_type, dim);
  const size_t out_row = RowBytes(table_type, dim);
  if (!IsQuantized(table_type)) {
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t j = 0; j < dim; ++j) {
        StoreFromFloat(out + r * out_row, table_type, j, LoadAsFloat(in + r * in_row, in_type, j));
      }
    }
    return absl::OkStatus();
  }
  std::vector<float> values(static_cast<size_t>(dim));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < dim; ++j) {
      values[j] = LoadAsFloat(in + r * in_row, in_type, j);
    }
    if (absl::Status s = QuantizeRow(values.data(), dim, table_type, out + r * out_row); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("row ", first_row + r, ": ", s.message()));
    }
  }
  return absl::OkStatus();
}

}  // namespace emb
