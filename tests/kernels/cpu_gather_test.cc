// Tests kernels::CpuGather against a per-element reference built from
// gather_test_util.h (not from data_type.h), for every table and answer type.
// Runs everywhere (no GPU).
#include "kernels/cpu_gather.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/data_type.h"
#include "tests/kernels/gather_test_util.h"

namespace emb::kernels::cpu_gather_test {
namespace {

using ::emb::testing::FloatFromBits;
using ::emb::testing::IsBf16Nan;
using ::emb::testing::IsHalfNan;
using ::emb::testing::RandomTable;
using ::emb::testing::RefFloatToBf16;
using ::emb::testing::RefFloatToHalf;
using ::emb::testing::RefLoad;

constexpr DataType kTypes[] = {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16};

uint32_t ReadBits(const std::byte* p, DataType t, size_t i) {
  if (t == DataType::kFloat32) {
    uint32_t u;
    std::memcpy(&u, p + 4 * i, 4);
    return u;
  }
  uint16_t h;
  std::memcpy(&h, p + 2 * i, 2);
  return h;
}

bool IsNanBits(uint32_t bits, DataType t) {
  switch (t) {
    case DataType::kFloat32:
      return std::isnan(FloatFromBits(bits));
    case DataType::kFloat16:
      return IsHalfNan(static_cast<uint16_t>(bits));
    case DataType::kBFloat16:
      return IsBf16Nan(static_cast<uint16_t>(bits));
    default:  // quantized types are never answers
      break;
  }
  return false;
}

// Checks out[i][j] against the reference conversion of table[ids[i]][j], every
// element.
void ExpectMatchesReference(const std::vector<std::byte>& table, DataType table_type, int64_t dim,
                            const std::vector<int64_t>& ids, DataType out_type,
                            const std::vector<std::byte>& out) {
  int failures = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    for (int64_t j = 0; j < dim; ++j) {
      const size_t src = static_cast<size_t>(ids[i] * dim + j);
      const size_t dst = i * static_cast<size_t>(dim) + static_cast<size_t>(j);
      const uint32_t got = ReadBits(out.data(), out_type, dst);
      bool ok;
      if (table_type == out_type) {
        ok = got == ReadBits(table.data(), table_type, src);  // a copy keeps every bit
      } else {
        const double v = RefLoad(table.data(), table_type, src);
        if (std::isnan(v)) {
          ok = IsNanBits(got, out_type);
        } else {
          const auto f = static_cast<float>(v);  // exact: every input is a float value
          uint32_t want = 0;
          switch (out_type) {
            case DataType::kFloat32:
              want = ::emb::testing::BitsOfFloat(f);
              break;
            case DataType::kFloat16:
              want = RefFloatToHalf(f);
              break;
            case DataType::kBFloat16:
              want = RefFloatToBf16(f);
              break;
            default:  // quantized types are never answers
              break;
          }
          ok = got == want;
        }
      }
      if (!ok && ++failures <= 10) {
        ADD_FAILURE() << "answer " << i << " (id " << ids[i] << ") element " << j << ": got 0x"
                      << std::hex << got << " from table bits 0x"
                      << ReadBits(table.data(), table_type, src);
      }
    }
  }
  EXPECT_EQ(failures, 0);
}

class CpuGatherTypesTest
    : public ::testing::TestWithParam<std::tuple<DataType, DataType, int64_t>> {};

TEST_P(CpuGatherTypesTest, MatchesReferenceWithDuplicatesAndEdgeRows) {
  const auto [table_type, out_type, dim] = GetParam();
  constexpr int64_t kRows = 97;
  const std::vector<std::byte> table =
      RandomTable(table_type, static_cast<size_t>(kRows * dim), 7 + static_cast<uint32_t>(dim));
  std::vector<int64_t> ids = {0, kRows - 1, 5, 5, 0, kRows - 1, 42};
  for (int64_t i = 0; i < 300; ++i) {
    ids.push_back((i * 37) % kRows);
  }
  std::vector<std::byte> out(ids.size() * static_cast<size_t>(dim) * ElementSize(out_type),
                             std::byte{0xa5});
  CpuGather(table.data(), table_type, dim, ids, out_type, out.data());
  ExpectMatchesReference(table, table_type, dim, ids, out_type, out);
}

INSTANTIATE_TEST_SUITE_P(AllPairs, CpuGatherTypesTest,
                         ::testing::Combine(::testing::ValuesIn(kTypes),
                                            ::testing::ValuesIn(kTypes),
                                            ::testing::Values<int64_t>(1, 3, 128, 300)),
                         [](const ::testing::TestParamInfo<CpuGatherTypesTest::ParamType>& info) {
                           return std::string(DataTypeName(std::get<0>(info.param))) + "_to_" +
                                  DataTypeName(std::get<1>(info.param)) + "_dim" +
                                  std::to_string(std::get<2>(info.param));
                         });

TEST(CpuGather, EmptyBatchWritesNothing) {
  const std::vector<std::byte> table = RandomTable(DataType::kFloat32, 12, 1);
  std::vector<std::byte> out(16, std::byte{0x5a});
  CpuGather(table.data(), DataType::kFloat32, 3, {}, DataType::kFloat16, out.data());
  EXPECT_EQ(out, std::vector<std::byte>(16, std::byte{0x5a}));
}

TEST(CpuGather, CopiesRowsInIdOrder) {
  const float table[3][2] = {{1, 2}, {3, 4}, {5, 6}};
  const std::vector<int64_t> ids = {2, 0, 2, 1};
  float out[4][2] = {};
  CpuGather(reinterpret_cast<const std::byte*>(table), DataType::kFloat32, 2, ids,
            DataType::kFloat32, reinterpret_cast<std::byte*>(out));
  const float want[4][2] = {{5, 6}, {1, 2}, {5, 6}, {3, 4}};
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(out[i][0], want[i][0]) << i;
    EXPECT_EQ(out[i][1], want[i][1]) << i;
  }
}

TEST(CpuGather, RoundsToNearestEven) {
  // 1 + 2^-11 is halfway between halves 1 and 1 + 2^-10: even is 1 (0x3c00).
  // 1 + 3 * 2^-11 is halfway between 1 + 2^-10 and 1 + 2^-9: even is 0x3c02.
  const float table[1][2] = {{1.0f + std::ldexp(1.0f, -11), 1.0f + 3 * std::ldexp(1.0f, -11)}};
  const std::vector<int64_t> ids = {0};
  uint16_t out[2] = {};
  CpuGather(reinterpret_cast<const std::byte*>(table), DataType::kFloat32, 2, ids,
            DataType::kFloat16, reinterpret_cast<std::byte*>(out));
  EXPECT_EQ(out[0], 0x3c00);
  EXPECT_EQ(out[1], 0x3c02);
}

}  // namespace
}  // namespace emb::kernels::cpu_gather_test
