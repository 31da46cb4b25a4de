// Tests row-wise quantization (kernels/quantize_rows.h), the quantized row layouts
// (kernels/quantize.h) and the CPU pooled gather (kernels/cpu_gather.h) against references
// computed here: rows decoded from their bytes with the layout written out below, sums in float64.
// Needs no GPU.
#include "kernels/quantize.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "kernels/cpu_gather.h"
#include "kernels/data_type.h"
#include "kernels/quantize_rows.h"
#include "tests/kernels/gather_test_util.h"

namespace emb::kernels::quantize_test {
namespace {

using ::emb::testing::BitsOfFloat;
using ::emb::testing::RefHalfValue;
using ::emb::testing::RefLoad;

// A quantized row decoded from its bytes by the FBGEMM layout (independently of quantize.h):
// int8: dim bytes, float32 scale, float32 bias; int4: ceil(dim / 2) bytes, element j in byte
// j / 2, low nibble for even j, then float16 scale and bias. All little-endian.
struct RefRow {
  float scale = 0;
  float bias = 0;
  std::vector<int> levels;
};

RefRow DecodeRow(const std::byte* row, DataType t, int64_t dim) {
  RefRow r;
  const auto* u = reinterpret_cast<const uint8_t*>(row);
  if (t == DataType::kInt8Rowwise) {
    for (int64_t j = 0; j < dim; ++j) {
      r.levels.push_back(u[j]);
    }
    std::memcpy(&r.scale, u + dim, 4);
    std::memcpy(&r.bias, u + dim + 4, 4);
    return r;
  }
  for (int64_t j = 0; j < dim; ++j) {
    r.levels.push_back((u[j / 2] >> (j % 2 == 0 ? 0 : 4)) & 0xf);
  }
  const uint8_t* s = u + (dim + 1) / 2;
  r.scale = static_cast<float>(RefHalfValue(static_cast<uint16_t>(s[0] | (s[1] << 8))));
  r.bias = static_cast<float>(RefHalfValue(static_cast<uint16_t>(s[2] | (s[3] << 8))));
  return r;
}

// Element j as the layout defines it: scale * q rounded to float32, plus bias rounded to float32.
// (A product of a float and an integer below 2^8 is exact in float64, and a float64 sum of two
// floats rounds to the correctly rounded float32 sum.)
float RefElement(const RefRow& r, int64_t j) {
  const auto product = static_cast<float>(double{r.scale} * r.levels[j]);
  return static_cast<float>(double{product} + double{r.bias});
}

// The gap from |v| to the next float32 away from zero.
double Ulp(double v) {
  const auto a = static_cast<float>(std::fabs(v));
  return double{std::nextafter(a, std::numeric_limits<float>::infinity())} - a;
}

// The levels of a quantized type.
int Levels(DataType t) { return t == DataType::kInt8Rowwise ? 256 : 16; }

// The largest error the dequantization's own float32 rounding adds to an element of a row whose
// values lie in [lo, hi]: the product scale * q (at most about hi - lo) and the sum (at most about
// max(|lo|, |hi|) + a step) are each rounded to float32, half an ulp each, so one ulp of twice the
// larger of |lo|, |hi| and hi - lo bounds both.
double DequantizationRounding(double lo, double hi) {
  return Ulp(2 * std::max({std::fabs(lo), std::fabs(hi), hi - lo}));
}

// Quantizes `values` as `t`, and expects every element, dequantized the way the gathers do
// (LoadRowElement), to be the layout's value of its bytes and within half of the row's step,
// (largest - smallest) / (levels - 1), of the original, or half of its scale where that is larger
// (a row too narrow for its magnitude: quantize.h), plus DequantizationRounding.
void ExpectQuantizesWithinHalfAStep(const std::vector<float>& values, DataType t) {
  const auto dim = static_cast<int64_t>(values.size());
  std::vector<std::byte> row(RowBytes(t, dim));
  const absl::Status s = QuantizeRow(values.data(), dim, t, row.data());
  ASSERT_TRUE(s.ok()) << s;
  const RefRow ref = DecodeRow(row.data(), t, dim);
  ASSERT_GE(ref.scale, 0.0f);
  ASSERT_TRUE(std::isfinite(ref.scale) && std::isfinite(ref.bias));
  const double lo = *std::min_element(values.begin(), values.end());
  const double hi = *std::max_element(values.begin(), values.end());
  const double step = (hi - lo) / (Levels(t) - 1);
  const double bound = std::max(step, double{ref.scale}) / 2 + DequantizationRounding(lo, hi);
  for (int64_t j = 0; j < dim; ++j) {
    const float got = LoadRowElement(reinterpret_cast<const uint8_t*>(row.data()), t, dim, j);
    ASSERT_EQ(BitsOfFloat(got), BitsOfFloat(RefElement(ref, j)))
        << "element " << j << ": LoadRowElement " << got << ", the layout's value "
        << RefElement(ref, j);
    const double x = values[j];
    const double err = std::fabs(double{got} - x);
    ASSERT_LE(err, bound) << DataTypeName(t) << " dim " << dim << " element " << j << ": " << x
                          << " dequantized to " << got << ", step " << step << ", scale "
                          << ref.scale;
  }
}

std::vector<float> UniformRow(int64_t dim, float lo, float hi, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(static_cast<size_t>(dim));
  for (float& x : v) {
    x = u(rng);
  }
  return v;
}

class QuantizeRowTest : public ::testing::TestWithParam<DataType> {};

// Issue 40: a 500x64 table of uniform values in [-3, 3] quantized to int4 had 23 elements off by
// up to 0.5003 of their row's step (the float16 bias rounded down and scale rounded up made the
// levels wider than the step). Tables of several shapes and ranges: every element within half
// its row's step, (largest - smallest) / (levels - 1), plus only the dequantization's own float32
// rounding (DequantizationRounding: under 1e-6 of a step here); and each row's scale at most its
// step.
TEST_P(QuantizeRowTest, TablesAreWithinHalfTheirRowsStep) {
  const DataType t = GetParam();
  struct Table {
    int64_t rows;
    int64_t dim;
    float lo;
    float hi;
  };
  uint32_t seed = 4000;
  for (const Table& table :
       {Table{500, 64, -3, 3}, Table{300, 63, -3, 3}, Table{200, 3, -1, 1}, Table{200, 2, 0, 1},
        Table{100, 129, -0.01f, 0.02f}, Table{100, 300, -250, 1000}, Table{50, 7, 10, 11},
        Table{50, 33, -6e4f, 6e4f}, Table{64, 17, -1e-3f, 5e-4f}}) {
    SCOPED_TRACE(absl::StrCat(DataTypeName(t), " ", table.rows, "x", table.dim, ", values in [",
                              table.lo, ", ", table.hi, ")"));
    std::mt19937 rng(++seed);
    std::uniform_real_distribution<float> u(table.lo, table.hi);
    std::vector<float> values(static_cast<size_t>(table.dim));
    std::vector<std::byte> row(RowBytes(t, table.dim));
    int64_t over = 0;
    double worst = 0;  // the largest error, in steps of its row
    for (int64_t r = 0; r < table.rows; ++r) {
      for (float& x : values) {
        x = u(rng);
      }
      const absl::Status s = QuantizeRow(values.data(), table.dim, t, row.data());
      ASSERT_TRUE(s.ok()) << s;
      const RefRow ref = DecodeRow(row.data(), t, table.dim);
      const double lo = *std::min_element(values.begin(), values.end());
      const double hi = *std::max_element(values.begin(), values.end());
      const double step = (hi - lo) / (Levels(t) - 1);
      EXPECT_LE(ref.scale, step) << "row " << r;
      for (int64_t j = 0; j < table.dim; ++j) {
        const double err = std::fabs(double{RefElement(ref, j)} - values[j]);
        if (err > step / 2 + DequantizationRounding(lo, hi)) {
          ++over;
        }
        if (step > 0) {
          worst = std::max(worst, err / step);
        }
      }
    }
    EXPECT_EQ(over, 0) << "elements off by more than half their row's step; the worst " << worst
                       << " of a step";
  }
}

TEST_P(QuantizeRowTest, RandomRowsAreWithinHalfAStep) {
  const DataType t = GetParam();
  uint32_t seed = 1;
  for (const int64_t dim : {1, 2, 3, 7, 8, 16, 127, 128, 300, 1001}) {
    for (const auto& [lo, hi] : std::vector<std::pair<float, float>>{{-1, 1},
                                                                     {-1e-3f, 1e-3f},
                                                                     {0, 1},
                                                                     {-100, 100},
                                                                     {-60000, 60000},
                                                                     {-5, -4},
                                                                     {1e-7f, 3e-7f},
                                                                     {2.5f, 2.5001f}}) {
      SCOPED_TRACE(absl::StrCat("dim ", dim, ", values in [", lo, ", ", hi, ")"));
      ExpectQuantizesWithinHalfAStep(UniformRow(dim, lo, hi, ++seed), t);
    }
  }
}

TEST_P(QuantizeRowTest, LargeOffsetsAreWithinHalfAStep) {
  const DataType t = GetParam();
  uint32_t seed = 100;
  for (const int64_t dim : {1, 3, 64, 301}) {
    for (const float base : {1000.0f, -1000.0f, 1000.3f, 30000.0f, -65000.0f}) {
      for (const float width : {1.0f, 1e-3f, 0.25f, 7.0f}) {
        SCOPED_TRACE(absl::StrCat("dim ", dim, ", values in [", base, ", ", base + width, ")"));
        ExpectQuantizesWithinHalfAStep(UniformRow(dim, base, base + width, ++seed), t);
      }
    }
  }
}

TEST_P(QuantizeRowTest, ConstantRowsAreWithinHalfAStep) {
  const DataType t = GetParam();
  for (const int64_t dim : {1, 2, 5, 128}) {
    for (const float c :
         {0.1f, 1.0f, -3.7f, 1000.3f, -0.0f, 0.0f, 65504.0f, -65504.0f, 1e-9f, -1e-6f}) {
      SCOPED_TRACE(absl::StrCat("dim ", dim, ", constant ", c));
      ExpectQuantizesWithinHalfAStep(std::vector<float>(static_cast<size_t>(dim), c), t);
    }
  }
}

TEST_P(QuantizeRowTest, TwoValueAndExtremeRowsAreWithinHalfAStep) {
  const DataType t = GetParam();
  ExpectQuantizesWithinHalfAStep({-65504.0f, 65504.0f, 0.5f}, t);
  ExpectQuantizesWithinHalfAStep({1.0f, 1.0001f}, t);
  ExpectQuantizesWithinHalfAStep({-1.0f, -1.0f, -1.0f, 2.0f, 2.0f}, t);
  ExpectQuantizesWithinHalfAStep({3.0e-8f, -2.0e-8f, 1.0e-8f}, t);  // below float16's subnormals
  if (t == DataType::kInt8Rowwise) {
    ExpectQuantizesWithinHalfAStep({-1e30f, 1e30f, 3.0f}, t);     // float32 scale and bias
    ExpectQuantizesWithinHalfAStep({1e-40f, 3e-40f, 2e-40f}, t);  // float32 subnormals
  }
}

TEST_P(QuantizeRowTest, RefusesNonFiniteValues) {
  const DataType t = GetParam();
  for (const float bad :
       {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
        -std::numeric_limits<float>::infinity()}) {
    for (const size_t at : {size_t{0}, size_t{2}, size_t{4}}) {
      std::vector<float> values = {1, 2, 3, 4, 5};
      values[at] = bad;
      std::vector<std::byte> row(RowBytes(t, 5));
      const absl::Status s = QuantizeRow(values.data(), 5, t, row.data());
      EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad << " at " << at << ": " << s;
    }
  }
}

// A row whose range exceeds float32's: its scale would be infinite (and scale * 0 a NaN).
TEST_P(QuantizeRowTest, RefusesARangeBeyondFloat32) {
  const DataType t = GetParam();
  const std::vector<float> values = {-3e38f, 3e38f, 0.0f};
  std::vector<std::byte> row(RowBytes(t, 3));
  EXPECT_EQ(QuantizeRow(values.data(), 3, t, row.data()).code(),
            absl::StatusCode::kInvalidArgument);
}

INSTANTIATE_TEST_SUITE_P(BothTypes, QuantizeRowTest, ::testing::ValuesIn(kQuantizedTypes),
                         [](const ::testing::TestParamInfo<DataType>& info) {
                           return std::string(DataTypeName(info.param));
                         });

TEST(QuantizeRowInt4, RefusesValuesBeyondFloat16) {
  for (const float bad : {65505.0f, 70000.0f, -65505.0f, -1e6f, 3e38f}) {
    std::vector<float> values = {0.0f, 1.0f, bad};
    std::vector<std::byte> row(RowBytes(DataType::kInt4Rowwise, 3));
    const absl::Status s = QuantizeRow(values.data(), 3, DataType::kInt4Rowwise, row.data());
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad << ": " << s;
  }
}

TEST(QuantizeRowInt8, TakesValuesBeyondFloat16) {
  ExpectQuantizesWithinHalfAStep({70000.0f, -1e6f, 5.0f}, DataType::kInt8Rowwise);
}

TEST(QuantizeRowLayout, Int4PacksLowNibbleFirst) {
  // 0, 15, 5, 10 with bias 0 and scale 1 (both exact in float16).
  const std::vector<float> values = {0, 15, 5, 10, 15};
  std::vector<std::byte> row(RowBytes(DataType::kInt4Rowwise, 5));
  ASSERT_TRUE(QuantizeRow(values.data(), 5, DataType::kInt4Rowwise, row.data()).ok());
  EXPECT_EQ(static_cast<int>(row[0]), 0xf0);
  EXPECT_EQ(static_cast<int>(row[1]), 0xa5);
  EXPECT_EQ(static_cast<int>(row[2]), 0x0f);  // the odd element's byte, high nibble unused
  EXPECT_EQ(static_cast<int>(row[3]), 0x00);  // scale 1.0 = 0x3c00, little-endian
  EXPECT_EQ(static_cast<int>(row[4]), 0x3c);
  EXPECT_EQ(static_cast<int>(row[5]), 0x00);  // bias 0
  EXPECT_EQ(static_cast<int>(row[6]), 0x00);
  EXPECT_EQ(RowBytes(DataType::kInt4Rowwise, 5), 7u);
  EXPECT_EQ(RowBytes(DataType::kInt8Rowwise, 5), 13u);
}

TEST(EncodeRows, QuantizesEachRowAsQuantizeRowDoes) {
  const int64_t rows = 6;
  const int64_t dim = 9;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-50, 50);
  std::vector<uint16_t> halves(static_cast<size_t>(rows * dim));
  for (uint16_t& h : halves) {
    h = FloatToHalf(u(rng));
  }
  for (const DataType t : kQuantizedTypes) {
    SCOPED_TRACE(DataTypeName(t));
    std::vector<std::byte> got(rows * RowBytes(t, dim));
    ASSERT_TRUE(EncodeRows(reinterpret_cast<const std::byte*>(halves.data()), DataType::kFloat16,
                           rows, dim, t, got.data())
                    .ok());
    for (int64_t r = 0; r < rows; ++r) {
      std::vector<float> values;
      for (int64_t j = 0; j < dim; ++j) {
        values.push_back(static_cast<float>(RefHalfValue(halves[r * dim + j])));
      }
      std::vector<std::byte> want(RowBytes(t, dim));
      ASSERT_TRUE(QuantizeRow(values.data(), dim, t, want.data()).ok());
      EXPECT_EQ(std::memcmp(got.data() + r * RowBytes(t, dim), want.data(), want.size()), 0)
          << "row " << r;
    }
  }
}

TEST(EncodeRows, NamesTheRowItRefuses) {
  std::vector<float> values(12, 1.0f);
  values[7] = std::numeric_limits<float>::quiet_NaN();  // row 1 of 3 rows of dim 4
  std::vector<std::byte> out(3 * RowBytes(DataType::kInt8Rowwise, 4));
  const absl::Status s = EncodeRows(reinterpret_cast<const std::byte*>(values.data()),
                                    DataType::kFloat32, 3, 4, DataType::kInt8Rowwise, out.data());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("row 1"), absl::string_view::npos) << s;
}

TEST(EncodeRows, ConvertsValueTypesAsTheGatherDoes) {
  const std::vector<float> values = {1.0f, -2.5f, 3.14159f, 65519.0f, 1e-7f, -0.3f};
  for (const DataType t : kAllDataTypes) {
    std::vector<std::byte> got(RowBytes(t, 3) * 2);
    ASSERT_TRUE(EncodeRows(reinterpret_cast<const std::byte*>(values.data()), DataType::kFloat32, 2,
                           3, t, got.data())
                    .ok());
    for (size_t i = 0; i < values.size(); ++i) {
      std::vector<std::byte> want(ElementSize(t));
      StoreFromFloat(want.data(), t, 0, values[i]);
      EXPECT_EQ(std::memcmp(got.data() + i * ElementSize(t), want.data(), want.size()), 0)
          << DataTypeName(t) << " element " << i;
    }
  }
}

// ---- CpuPooledGather against float64 sums ----

// A table of `rows` x `dim` random values (never zero), encoded as `t`: rows of mixed scales,
// some with a large offset, some constant.
std::vector<std::byte> RandomTableOf(DataType t, int64_t rows, int64_t dim, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-4.0f, 4.0f);
  std::vector<float> values;
  values.reserve(static_cast<size_t>(rows * dim));
  for (int64_t r = 0; r < rows; ++r) {
    const float row_scale = std::array<float, 4>{0.01f, 1.0f, 10.0f, 0.25f}[r % 4];
    const float offset = r % 5 == 0 ? 100.0f : 0.0f;
    const bool constant = r % 7 == 3;
    float c = u(rng);
    for (int64_t j = 0; j < dim; ++j) {
      float x = constant ? c : u(rng);
      if (x == 0.0f) {
        x = 0.5f;
      }
      values.push_back(x * row_scale + offset);
    }
  }
  std::vector<std::byte> out(static_cast<size_t>(rows) * RowBytes(t, dim));
  const absl::Status s = EncodeRows(reinterpret_cast<const std::byte*>(values.data()),
                                    DataType::kFloat32, rows, dim, t, out.data());
  EXPECT_TRUE(s.ok()) << s;
  return out;
}

// Element j of row `id` of a table of `t`, in float64, decoded here.
double RefTableElement(const std::vector<std::byte>& table, DataType t, int64_t dim, int64_t id,
                       int64_t j) {
  const std::byte* row = table.data() + static_cast<size_t>(id) * RowBytes(t, dim);
  if (IsQuantized(t)) {
    return RefElement(DecodeRow(row, t, dim), j);
  }
  return RefLoad(row, t, static_cast<size_t>(j));
}

enum class Pooling { kSum, kWeightedSum, kMean };

const char* PoolingName(Pooling p) {
  switch (p) {
    case Pooling::kSum:
      return "sum";
    case Pooling::kWeightedSum:
      return "weighted_sum";
    case Pooling::kMean:
      return "mean";
  }
  return "?";
}

class CpuPooledGatherTest
    : public ::testing::TestWithParam<std::tuple<DataType, DataType, int64_t>> {};

TEST_P(CpuPooledGatherTest, MatchesAFloat64Sum) {
  const auto [table_type, out_type, dim] = GetParam();
  const int64_t rows = 97;
  const auto seed = static_cast<uint32_t>(dim * 31 + static_cast<int>(table_type) * 7 +
                                          static_cast<int>(out_type));
  const std::vector<std::byte> table = RandomTableOf(table_type, rows, dim, seed);
  std::mt19937 rng(seed);
  // Bag lengths: empty, one, odd, even, long.
  const std::vector<int64_t> lengths = {0, 1, 3, 7, 300, 2, 1, 0, 33, 64, 5};
  std::vector<int64_t> offsets = {0};
  std::vector<int64_t> ids;
  std::vector<float> weights;
  std::uniform_real_distribution<float> w(-2.0f, 2.0f);
  for (const int64_t len : lengths) {
    for (int64_t k = 0; k < len; ++k) {
      ids.push_back(k == 0 ? rows - 1 : static_cast<int64_t>(rng() % rows));
      float x = w(rng);
      weights.push_back(x == 0.0f ? 1.5f : x);
    }
    offsets.push_back(static_cast<int64_t>(ids.size()));
  }
  std::vector<float> means;
  for (const int64_t len : lengths) {
    means.push_back(len == 0 ? 0.0f : 1.0f / static_cast<float>(len));
  }
  for (const Pooling pooling : {Pooling::kSum, Pooling::kWeightedSum, Pooling::kMean}) {
    SCOPED_TRACE(PoolingName(pooling));
    Bags bags;
    bags.ids = ids;
    bags.offsets = offsets;
    if (pooling == Pooling::kWeightedSum) {
      bags.weights = weights;
    }
    if (pooling == Pooling::kMean) {
      bags.scales = means;
    }
    std::vector<std::byte> got(lengths.size() * RowBytes(out_type, dim));
    CpuPooledGather(table.data(), table_type, dim, bags, out_type, got.data());
    // float32 accumulation: 1e-5 of the sum of magnitudes; then the answer type's rounding.
    const double rel_out = out_type == DataType::kFloat32   ? 0
                           : out_type == DataType::kFloat16 ? std::ldexp(1.0, -11)
                                                            : std::ldexp(1.0, -8);
    const double abs_floor = out_type == DataType::kFloat16 ? std::ldexp(1.0, -25) : 1e-37;
    int failures = 0;
    for (size_t b = 0; b < lengths.size() && failures < 10; ++b) {
      for (int64_t j = 0; j < dim && failures < 10; ++j) {
        double sum = 0;
        double magnitude = 0;
        for (int64_t k = offsets[b]; k < offsets[b + 1]; ++k) {
          const double x = RefTableElement(table, table_type, dim, ids[k], j);
          const double term = pooling == Pooling::kWeightedSum ? double{weights[k]} * x : x;
          sum += term;
          magnitude += std::fabs(term);
        }
        const double scale = pooling == Pooling::kMean ? double{means[b]} : 1.0;
        const double want = sum * scale;
        const double tol = 1e-5 * magnitude * scale + rel_out * std::fabs(want) + abs_floor;
        const double have =
            RefLoad(got.data() + b * RowBytes(out_type, dim), out_type, static_cast<size_t>(j));
        if (!(std::fabs(have - want) <= tol)) {
          ADD_FAILURE() << "bag " << b << " (length " << lengths[b] << ") element " << j << ": "
                        << have << ", float64 " << want << ", tolerance " << tol;
          ++failures;
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, CpuPooledGatherTest,
                         ::testing::Combine(::testing::ValuesIn(kAllTableTypes),
                                            ::testing::ValuesIn(kAllDataTypes),
                                            ::testing::Values<int64_t>(1, 3, 8, 127, 300)),
                         [](const ::testing::TestParamInfo<CpuPooledGatherTest::ParamType>& info) {
                           return std::string(DataTypeName(std::get<0>(info.param))) + "_to_" +
                                  DataTypeName(std::get<1>(info.param)) + "_dim" +
                                  std::to_string(std::get<2>(info.param));
                         });

// A gather of a quantized table is the layout's value of each element, converted once.
TEST(CpuGatherQuantized, DequantizesEveryElement) {
  const int64_t rows = 20;
  const int64_t dim = 11;
  const std::vector<int64_t> ids = {0, 19, 5, 5, 12};
  for (const DataType t : kQuantizedTypes) {
    const std::vector<std::byte> table = RandomTableOf(t, rows, dim, 3);
    for (const DataType out_type : kAllDataTypes) {
      std::vector<std::byte> got(ids.size() * RowBytes(out_type, dim));
      CpuGather(table.data(), t, dim, ids, out_type, got.data());
      for (size_t i = 0; i < ids.size(); ++i) {
        for (int64_t j = 0; j < dim; ++j) {
          std::vector<std::byte> want(ElementSize(out_type));
          StoreFromFloat(want.data(), out_type, 0,
                         static_cast<float>(RefTableElement(table, t, dim, ids[i], j)));
          EXPECT_EQ(std::memcmp(got.data() + (i * dim + j) * ElementSize(out_type), want.data(),
                                want.size()),
                    0)
              << DataTypeName(t) << " -> " << DataTypeName(out_type) << " id " << ids[i]
              << " element " << j;
        }
      }
    }
  }
}

}  // namespace
}  // namespace emb::kernels::quantize_test
