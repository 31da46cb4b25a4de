#include "client/npy_file.h"

#include <cstdint>
#include <cstring>
#include <string>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace emb::client::npy_file_test {
namespace {

using ::emb::testing::IsOk;
using ::emb::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A .npy file of format `version` (1 or 2) with this header dict, padded as NumPy pads it (to a
// multiple of 64 with spaces and a newline), then `data`.
std::string Npy(const std::string& dict, const std::string& data, int version = 1) {
  const size_t prefix = version == 1 ? 10 : 12;
  std::string header = dict;
  while ((prefix + header.size() + 1) % 64 != 0) {
    header += ' ';
  }
  header += '\n';
  std::string out("\x93NUMPY", 6);
  out += static_cast<char>(version);
  out += '\0';
  const uint32_t len = static_cast<uint32_t>(header.size());
  out += static_cast<char>(len & 0xff);
  out += static_cast<char>((len >> 8) & 0xff);
  if (version != 1) {
    out += static_cast<char>((len >> 16) & 0xff);
    out += static_cast<char>((len >> 24) & 0xff);
  }
  return out + header + data;
}

std::string Floats(std::initializer_list<float> values) {
  std::string out(values.size() * 4, '\0');
  std::memcpy(out.data(), values.begin(), out.size());
  return out;
}

TEST(ParseNpy, ReadsA2DFloat32Array) {
  const std::string data = Floats({1, 2, 3, 4, 5, 6});
  absl::StatusOr<NpyArray> a =
      ParseNpy(Npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", data), "x.npy");
  ASSERT_THAT(a, IsOk());
  EXPECT_EQ(a->descr, "<f4");
  EXPECT_EQ(a->element_size, 4u);
  EXPECT_THAT(a->shape, ElementsAre(2, 3));
  EXPECT_EQ(a->data, data);
}

TEST(ParseNpy, ReadsVersion2And1DAndVoidElements) {
  const std::string data(10, '\x07');
  absl::StatusOr<NpyArray> a =
      ParseNpy(Npy("{'descr': '|V2', 'fortran_order': False, 'shape': (5,), }", data, 2), "x");
  ASSERT_THAT(a, IsOk());
  EXPECT_EQ(a->descr, "|V2");
  EXPECT_EQ(a->element_size, 2u);
  EXPECT_THAT(a->shape, ElementsAre(5));
  EXPECT_EQ(a->data, data);
  // A 1-D array may say fortran_order True: the order is the same.
  EXPECT_THAT(ParseNpy(Npy("{'descr': '<i8', 'fortran_order': True, 'shape': (0,), }", ""), "x"),
              IsOk());
}

TEST(ParseNpy, RefusesWhatItCannotRead) {
  const std::string two = Floats({1, 2});
  EXPECT_THAT(ParseNpy("not numpy at all", "a.npy"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("a.npy: not a .npy file")));
  EXPECT_THAT(
      ParseNpy(Npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", two).substr(0, 30),
               "a.npy"),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("cut .npy header")));
  EXPECT_THAT(ParseNpy(Npy("{'descr': '<f4', 'fortran_order': True, 'shape': (1, 2), }", two), "a"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("C order")));
  EXPECT_THAT(ParseNpy(Npy("{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", two), "a"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("big-endian")));
  EXPECT_THAT(ParseNpy(Npy("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", two), "a"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("holds 8 bytes of data")));
  EXPECT_THAT(ParseNpy(Npy("{'descr': '<f4', 'fortran_order': False, 'shape': (-1,), }", two), "a"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("bad shape")));
  EXPECT_THAT(ParseNpy(Npy("{'fortran_order': False, 'shape': (2,), }", two), "a"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("malformed")));
  EXPECT_THAT(ParseNpy(Npy("{'descr': '<f4', 'fortran_order': False, 'shape': "
                           "(4294967296, 4294967296, 4294967296), }",
                           two),
                       "a"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("overflows")));
  EXPECT_THAT(ReadNpy("/nonexistent/x.npy"), StatusIs(absl::StatusCode::kNotFound));
}

}  // namespace
}  // namespace emb::client::npy_file_test
