#include "service/tables/table_source.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/data_type.h"
#include "kernels/quantize.h"
#include "kernels/quantize_rows.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/table_files.h"

namespace emb::service::table_source_test {
namespace {

using ::emb::testing::IsOk;
using ::emb::testing::NpyDict;
using ::emb::testing::NpyFile;
using ::emb::testing::NpyHeader;
using ::emb::testing::RandomRows;
using ::emb::testing::SafetensorsFile;
using ::emb::testing::SafetensorsFromHeader;
using ::emb::testing::SafetensorsHeaderJson;
using ::emb::testing::SafetensorsTensor;
using ::emb::testing::StatusIs;
using ::emb::testing::TempDir;
using ::emb::testing::WriteFile;
using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr int64_t kTwoTo62 = int64_t{1} << 62;

// The status of a broken file: `code`, naming the file and the defect.
auto Defect(const std::string& path, const std::string& what,
            absl::StatusCode code = absl::StatusCode::kInvalidArgument) {
  return StatusIs(code, AllOf(HasSubstr(path), HasSubstr(what)));
}

std::string Bytes(absl::Span<const std::byte> b) {
  return std::string(reinterpret_cast<const char*>(b.data()), b.size());
}

// Every byte of the table through Read(), and through ReadAll().
std::string ReadAll(const TableSource& source) {
  std::vector<std::byte> out(source.bytes());
  EXPECT_THAT(source.Read(0, absl::MakeSpan(out)), IsOk());
  return Bytes(out);
}
std::string ReadAllBytes(const TableSource& source) {
  auto rows = source.ReadAll();
  EXPECT_THAT(rows, IsOk());
  if (!rows.ok()) {
    return "";
  }
  return Bytes(absl::MakeConstSpan((*rows)->data(), source.bytes()));
}

class TableSourceTest : public ::testing::Test {
 protected:
  // Writes `bytes` as dir/`file` and opens it as table "t", with `tensor` after '#'. Checks that
  // ParseTableFile() on the same bytes (the fuzzers' entry point) says what Open() says.
  absl::StatusOr<std::unique_ptr<TableSource>> Open(const std::string& file,
                                                    const std::string& bytes,
                                                    const std::string& tensor = "") {
    const std::string path = dir_.File(file);
    EXPECT_THAT(WriteFile(path, bytes), IsOk());
    const TableSpec spec{"t", path, tensor, {}};
    absl::StatusOr<std::unique_ptr<TableSource>> source = TableSource::Open(spec);
    const absl::StatusOr<TableLayout> layout = ParseTableFile(spec, bytes);
    if (!source.ok()) {
      EXPECT_EQ(layout.status(), source.status());
    } else if (layout.ok()) {
      EXPECT_EQ(layout->rows, (*source)->rows());
      EXPECT_EQ(layout->dim, (*source)->dim());
      EXPECT_EQ(layout->dtype, (*source)->dtype());
      std::vector<std::byte> first_row((*source)->row_bytes());
      EXPECT_THAT((*source)->Read(0, absl::MakeSpan(first_row)), IsOk());
      EXPECT_TRUE(bytes.substr(layout->data_offset, first_row.size()) == Bytes(first_row))
          << "ParseTableFile's data_offset is not where Open() reads the rows";
    } else {
      ADD_FAILURE() << "Open() succeeded but ParseTableFile() says " << layout.status();
    }
    return source;
  }
  std::string Path(const std::string& file) const { return dir_.File(file); }

  // Opens the file, checks its shape and type, and that Read() and ReadAll() give `data` exactly.
  void ExpectTable(const std::string& file, const std::string& bytes, const std::string& tensor,
                   int64_t rows, int64_t dim, DataType dtype, const std::string& data) {
    auto source = Open(file, bytes, tensor);
    ASSERT_THAT(source, IsOk());
    const TableSource& s = **source;
    EXPECT_EQ(s.name(), "t");
    EXPECT_EQ(s.rows(), rows);
    EXPECT_EQ(s.dim(), dim);
    EXPECT_EQ(s.dtype(), dtype);
    EXPECT_EQ(s.bytes(), data.size());
    EXPECT_EQ(s.row_bytes(), static_cast<size_t>(dim) * ElementSize(dtype));
    EXPECT_EQ(s.origin(), tensor.empty() ? Path(file) : absl::StrCat(Path(file), "#", tensor));
    EXPECT_TRUE(ReadAll(s) == data) << "Read() differs from the bytes written";
    EXPECT_TRUE(ReadAllBytes(s) == data) << "ReadAll() differs from the bytes written";
  }

  TempDir dir_;
};

// --- Good files ---------------------------------------------------------------------------------

TEST_F(TableSourceTest, OpensNpyFloat32) {
  const std::string data = RandomRows(DataType::kFloat32, 7 * 5, 1);
  ExpectTable("t.npy", NpyFile("<f4", {7, 5}, data), "", 7, 5, DataType::kFloat32, data);
}

TEST_F(TableSourceTest, OpensNpyFloat16) {
  const std::string data = RandomRows(DataType::kFloat16, 9 * 3, 2);
  ExpectTable("t.npy", NpyFile("<f2", {9, 3}, data), "", 9, 3, DataType::kFloat16, data);
}

TEST_F(TableSourceTest, OpensNpyVersion2Header) {
  const std::string data = RandomRows(DataType::kFloat32, 4 * 6, 3);
  ExpectTable("t.npy", NpyFile("<f4", {4, 6}, data, /*major=*/2), "", 4, 6, DataType::kFloat32,
              data);
}

TEST_F(TableSourceTest, OpensNpyWithUnpaddedHeader) {
  // Not every writer pads to 64 bytes: the data starts right after the declared header.
  const std::string dict = NpyDict("<f4", {2, 3});
  std::string header("\x93NUMPY\x01\x00", 8);
  header.push_back(static_cast<char>(dict.size()));
  header.push_back('\0');
  const std::string data = RandomRows(DataType::kFloat32, 2 * 3, 4);
  ExpectTable("t.npy", header + dict + data, "", 2, 3, DataType::kFloat32, data);
}

TEST_F(TableSourceTest, OpensSafetensorsF32) {
  const std::string data = RandomRows(DataType::kFloat32, 5 * 4, 5);
  ExpectTable("t.safetensors", SafetensorsFile({{"emb", "F32", {5, 4}, data}}), "", 5, 4,
              DataType::kFloat32, data);
}

TEST_F(TableSourceTest, OpensSafetensorsF16) {
  const std::string data = RandomRows(DataType::kFloat16, 6 * 7, 6);
  ExpectTable("t.safetensors", SafetensorsFile({{"emb", "F16", {6, 7}, data}}), "", 6, 7,
              DataType::kFloat16, data);
}

TEST_F(TableSourceTest, OpensSafetensorsBF16) {
  const std::string data = RandomRows(DataType::kBFloat16, 3 * 8, 7);
  ExpectTable("t.safetensors", SafetensorsFile({{"emb", "BF16", {3, 8}, data}}), "", 3, 8,
              DataType::kBFloat16, data);
}

TEST_F(TableSourceTest, PicksTheNamedTensorAmongSeveral) {
  const std::string a = RandomRows(DataType::kFloat32, 2 * 3, 8);
  const std::string b = RandomRows(DataType::kFloat16, 4 * 5, 9);
  const std::string c = RandomRows(DataType::kBFloat16, 3 * 2, 10);
  const std::string file = SafetensorsFile(
      {{"first", "F32", {2, 3}, a}, {"middle", "F16", {4, 5}, b}, {"last", "BF16", {3, 2}, c}});
  ExpectTable("t.safetensors", file, "middle", 4, 5, DataType::kFloat16, b);
  ExpectTable("t.safetensors", file, "last", 3, 2, DataType::kBFloat16, c);
  ExpectTable("t.safetensors", file, "first", 2, 3, DataType::kFloat32, a);
}

TEST_F(TableSourceTest, PicksTheOnlyTensorWithoutName) {
  const std::string data = RandomRows(DataType::kFloat32, 3 * 3, 11);
  ExpectTable("t.safetensors", SafetensorsFile({{"weight", "F32", {3, 3}, data}}), "", 3, 3,
              DataType::kFloat32, data);
}

TEST_F(TableSourceTest, IgnoresSafetensorsMetadata) {
  const std::string data = RandomRows(DataType::kFloat32, 2 * 2, 12);
  const std::string json = R"({"__metadata__":{"format":"pt"},)"
                           R"("weight":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]}})";
  ExpectTable("t.safetensors", SafetensorsFromHeader(json, data), "", 2, 2, DataType::kFloat32,
              data);
}

TEST_F(TableSourceTest, ReadsASubRangeOfAFile) {
  const std::string data = RandomRows(DataType::kFloat32, 10 * 4, 13);
  auto source = Open("t.npy", NpyFile("<f4", {10, 4}, data));
  ASSERT_THAT(source, IsOk());
  std::vector<std::byte> part(3 * 16);
  ASSERT_THAT((*source)->Read(5 * 16, absl::MakeSpan(part)), IsOk());
  EXPECT_TRUE(Bytes(part) == data.substr(5 * 16, 3 * 16));
}

TEST_F(TableSourceTest, ReadPastTheTableIsOutOfRange) {
  const std::string data = RandomRows(DataType::kFloat32, 2 * 2, 14);
  auto source = Open("t.npy", NpyFile("<f4", {2, 2}, data + "trailing bytes"));
  ASSERT_THAT(source, IsOk());
  std::vector<std::byte> part(8);
  EXPECT_THAT((*source)->Read(12, absl::MakeSpan(part)),
              StatusIs(absl::StatusCode::kOutOfRange, HasSubstr(Path("t.npy"))));
}

// GpuStore's readers read disjoint chunks of one source at once, after AdviseSequential().
TEST_F(TableSourceTest, ConcurrentReadsOfDisjointChunksGiveTheFile) {
  const std::string data = RandomRows(DataType::kFloat32, 300 * 7, 16);
  auto source = Open("t.npy", NpyFile("<f4", {300, 7}, data));
  ASSERT_THAT(source, IsOk());
  const TableSource& s = **source;
  s.AdviseSequential();
  constexpr size_t kChunk = 97;  // divides neither the rows nor the table
  std::vector<std::byte> out(s.bytes());
  std::vector<absl::Status> failures(4);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < failures.size(); ++t) {
    threads.emplace_back([&, t] {
      for (size_t offset = t * kChunk; offset < out.size(); offset += failures.size() * kChunk) {
        const size_t n = std::min(kChunk, out.size() - offset);
        if (absl::Status st = s.Read(offset, absl::MakeSpan(out.data() + offset, n)); !st.ok()) {
          failures[t] = st;
          return;
        }
      }
    });
  }
  for (std::thread& t : threads) {
    t.join();
  }
  for (const absl::Status& st : failures) {
    EXPECT_THAT(st, IsOk());
  }
  EXPECT_TRUE(Bytes(out) == data);
}

TEST(TableSourceDemo, AdviseSequentialIsHarmless) {
  auto source = TableSource::Demo("demo", 10, 3, 7);
  const std::string before = ReadAll(*source);
  source->AdviseSequential();
  EXPECT_TRUE(ReadAll(*source) == before);
}

// `offset + size` must not wrap around: a wrapped sum would pass the check and read the header.
TEST_F(TableSourceTest, ReadWhoseEndOverflowsIsOutOfRange) {
  const std::string data = RandomRows(DataType::kFloat32, 2 * 2, 15);
  auto source = Open("t.npy", NpyFile("<f4", {2, 2}, data));
  ASSERT_THAT(source, IsOk());
  std::vector<std::byte> part(8);
  EXPECT_THAT((*source)->Read(std::numeric_limits<size_t>::max() - 3, absl::MakeSpan(part)),
              StatusIs(absl::StatusCode::kOutOfRange));
}

// A file re-exported in place while the server loads it (np.save truncates first): ReadAll reads
// with pread, so the shrunk file is an error naming it and the offset, not a SIGBUS.
TEST_F(TableSourceTest, AFileTruncatedAfterOpenIsAReadErrorNotASignal) {
  const std::string data = RandomRows(DataType::kFloat32, 64 * 16, 21);
  auto source = Open("t.npy", NpyFile("<f4", {64, 16}, data));
  ASSERT_THAT(source, IsOk());
  ASSERT_EQ(truncate(dir_.File("t.npy").c_str(), 200), 0);
  EXPECT_THAT((*source)->ReadAll().status(),
              StatusIs(absl::StatusCode::kInternal,
                       AllOf(HasSubstr(dir_.File("t.npy")), HasSubstr("unexpected end of file"))));
}

// A FIFO would block open() for ever, /dev/zero never ends, a directory reads as nothing: each is
// refused at once, saying what it is.
TEST_F(TableSourceTest, OnlyARegularFileIsATable) {
  const std::string fifo = dir_.File("t.fifo");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  for (const auto& [path, kind] : std::vector<std::pair<std::string, std::string>>{
           {fifo, "a FIFO"}, {"/dev/zero", "a character device"}, {dir_.path(), "a directory"}}) {
    EXPECT_THAT(TableSource::Open(TableSpec{"t", path, "", {}}).status(),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         AllOf(HasSubstr(path), HasSubstr(kind), HasSubstr("not a regular file"))))
        << path;
  }
}

// --- Demo tables --------------------------------------------------------------------------------

TEST(TableSourceDemo, HasTheRequestedShape) {
  auto demo = TableSource::Demo("d", 100, 12, 42);
  EXPECT_EQ(demo->name(), "d");
  EXPECT_EQ(demo->rows(), 100);
  EXPECT_EQ(demo->dim(), 12);
  EXPECT_EQ(demo->dtype(), DataType::kFloat32);
  EXPECT_EQ(demo->bytes(), 100u * 12u * 4u);
  EXPECT_EQ(demo->origin(), "demo(seed=42)");
}

TEST(TableSourceDemo, SameSeedGivesSameBytes) {
  auto a = TableSource::Demo("a", 50, 8, 7);
  auto b = TableSource::Demo("b", 50, 8, 7);
  EXPECT_TRUE(ReadAllBytes(*a) == ReadAllBytes(*b));
  EXPECT_TRUE(ReadAll(*a) == ReadAll(*b));
}

TEST(TableSourceDemo, DifferentSeedGivesDifferentBytes) {
  auto a = TableSource::Demo("a", 50, 8, 7);
  auto b = TableSource::Demo("b", 50, 8, 8);
  const std::string x = ReadAllBytes(*a);
  const std::string y = ReadAllBytes(*b);
  ASSERT_EQ(x.size(), y.size());
  size_t same = 0;
  for (size_t i = 0; i < x.size(); i += 4) {
    same += std::memcmp(x.data() + i, y.data() + i, 4) == 0 ? 1 : 0;
  }
  EXPECT_LT(same, 4u) << "of " << x.size() / 4 << " elements";
}

TEST(TableSourceDemo, ValuesAreInMinusOneToOneAndNotConstant) {
  auto demo = TableSource::Demo("d", 64, 16, 3);
  const std::string bytes = ReadAllBytes(*demo);
  float lo = 2;
  float hi = -2;
  for (size_t i = 0; i < bytes.size(); i += 4) {
    float v;
    std::memcpy(&v, bytes.data() + i, 4);
    ASSERT_GE(v, -1.0f) << "element " << i / 4;
    ASSERT_LT(v, 1.0f) << "element " << i / 4;
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  EXPECT_LT(lo, -0.5f);
  EXPECT_GT(hi, 0.5f);
}

TEST(TableSourceDemo, ReadOfASubRangeEqualsThatRangeOfReadAll) {
  auto demo = TableSource::Demo("d", 40, 6, 99);
  const std::string all = ReadAllBytes(*demo);
  for (const auto& [offset, size] : std::vector<std::pair<size_t, size_t>>{
           {0, 24}, {24 * 7, 24 * 3}, {4, 8}, {all.size() - 4, 4}, {0, all.size()}}) {
    std::vector<std::byte> part(size);
    ASSERT_THAT(demo->Read(offset, absl::MakeSpan(part)), IsOk());
    EXPECT_TRUE(Bytes(part) == all.substr(offset, size)) << "offset " << offset << " size " << size;
  }
}

// Read promises bytes [offset, offset + size), also where they split a float32 element.
TEST(TableSourceDemo, ReadOfAnUnalignedRangeEqualsThatRangeOfReadAll) {
  auto demo = TableSource::Demo("d", 4, 4, 5);
  const std::string all = ReadAllBytes(*demo);
  for (const auto& [offset, size] :
       std::vector<std::pair<size_t, size_t>>{{2, 4}, {0, 6}, {5, 7}}) {
    std::vector<std::byte> part(size, std::byte{0x5a});
    ASSERT_THAT(demo->Read(offset, absl::MakeSpan(part)), IsOk());
    EXPECT_TRUE(Bytes(part) == all.substr(offset, size)) << "offset " << offset << " size " << size;
  }
}

// --- Broken files -------------------------------------------------------------------------------

TEST_F(TableSourceTest, MissingFileIsNotFound) {
  const std::string path = Path("missing.npy");
  EXPECT_THAT(TableSource::Open(TableSpec{"t", path, "", {}}),
              Defect(path, "cannot open", absl::StatusCode::kNotFound));
}

TEST_F(TableSourceTest, EmptyNpy) {
  EXPECT_THAT(Open("t.npy", ""), Defect(Path("t.npy"), "empty file"));
}

TEST_F(TableSourceTest, EmptySafetensors) {
  EXPECT_THAT(Open("t.safetensors", ""), Defect(Path("t.safetensors"), "empty file"));
}

TEST_F(TableSourceTest, NpyBadMagic) {
  std::string bytes = NpyFile("<f4", {2, 2}, RandomRows(DataType::kFloat32, 4, 1));
  bytes[1] = 'X';
  EXPECT_THAT(Open("t.npy", bytes), Defect(Path("t.npy"), "bad magic"));
}

TEST_F(TableSourceTest, SafetensorsBadMagic) {
  // A plausible header length but no JSON object behind it.
  EXPECT_THAT(Open("t.safetensors", SafetensorsFromHeader("PK\x03\x04 not json", "data")),
              Defect(Path("t.safetensors"), "bad magic"));
}

TEST_F(TableSourceTest, SafetensorsHeaderThatIsAJsonArrayIsBadMagic) {
  EXPECT_THAT(Open("t.safetensors", SafetensorsFromHeader("[1, 2]", "data")),
              Defect(Path("t.safetensors"), "bad magic"));
}

TEST_F(TableSourceTest, NpyCutInsideThePrefix) {
  const std::string bytes = NpyFile("<f4", {2, 2}, RandomRows(DataType::kFloat32, 4, 1));
  EXPECT_THAT(Open("t.npy", bytes.substr(0, 7)), Defect(Path("t.npy"), "cut .npy header"));
}

TEST_F(TableSourceTest, NpyCutInsideTheHeader) {
  const std::string bytes = NpyFile("<f4", {2, 2}, "");
  EXPECT_THAT(Open("t.npy", bytes.substr(0, 40)), Defect(Path("t.npy"), "cut .npy header"));
}

TEST_F(TableSourceTest, NpyVersion2CutInsideThePrefix) {
  const std::string bytes = NpyFile("<f4", {2, 2}, "", /*major=*/2);
  EXPECT_THAT(Open("t.npy", bytes.substr(0, 11)), Defect(Path("t.npy"), "cut .npy header"));
}

TEST_F(TableSourceTest, NpyHeaderWithoutShapeIsMalformed) {
  const std::string bytes = NpyHeader("{'descr': '<f4', 'fortran_order': False, }") +
                            RandomRows(DataType::kFloat32, 4, 1);
  EXPECT_THAT(Open("t.npy", bytes), Defect(Path("t.npy"), "malformed .npy header"));
}

TEST_F(TableSourceTest, NpyUnsupportedVersion) {
  std::string bytes = NpyFile("<f4", {2, 2}, RandomRows(DataType::kFloat32, 4, 1));
  bytes[6] = 9;
  EXPECT_THAT(Open("t.npy", bytes), Defect(Path("t.npy"), "unsupported .npy format version 9"));
}

TEST_F(TableSourceTest, SafetensorsCutInsideTheLength) {
  EXPECT_THAT(Open("t.safetensors", std::string("\x10\x00\x00", 3)),
              Defect(Path("t.safetensors"), "cut safetensors header"));
}

TEST_F(TableSourceTest, SafetensorsCutInsideTheHeader) {
  const std::string bytes =
      SafetensorsFile({{"emb", "F32", {2, 2}, RandomRows(DataType::kFloat32, 4, 1)}});
  EXPECT_THAT(Open("t.safetensors", bytes.substr(0, 30)),
              Defect(Path("t.safetensors"), "cut safetensors header"));
}

TEST_F(TableSourceTest, NpyTruncatedData) {
  const std::string data = RandomRows(DataType::kFloat32, 4 * 4, 1);
  EXPECT_THAT(Open("t.npy", NpyFile("<f4", {4, 4}, data.substr(0, data.size() - 1))),
              Defect(Path("t.npy"), "truncated data"));
}

TEST_F(TableSourceTest, SafetensorsTruncatedData) {
  const std::string data = RandomRows(DataType::kFloat16, 4 * 4, 1);
  const std::string json = SafetensorsHeaderJson({{"emb", "F16", {4, 4}, data}});
  EXPECT_THAT(Open("t.safetensors", SafetensorsFromHeader(json, data.substr(0, 20))),
              Defect(Path("t.safetensors"), "truncated data"));
}

TEST_F(TableSourceTest, SafetensorsDataOffsetsBeyondTheFile) {
  const std::string data = RandomRows(DataType::kFloat32, 2 * 2, 1);
  const std::string json =
      R"({"emb":{"dtype":"F32","shape":[2,2],"data_offsets":[1000000,1000016]}})";
  EXPECT_THAT(Open("t.safetensors", SafetensorsFromHeader(json, data)),
              Defect(Path("t.safetensors"), "truncated data"));
}

TEST_F(TableSourceTest, SafetensorsDataOffsetsThatDisagreeWithTheShape) {
  const std::string data = RandomRows(DataType::kFloat32, 2 * 2, 1);
  const std::string json = R"({"emb":{"dtype":"F32","shape":[2,2],"data_offsets":[0,12]}})";
  EXPECT_THAT(Open("t.safetensors", SafetensorsFromHeader(json, data)),
              Defect(Path("t.safetensors"), "data_offsets span 12 bytes"));
}

TEST_F(TableSourceTest, SafetensorsBackwardDataOffsets) {
  const std::string data = RandomRows(DataType::kFloat32, 2 * 2, 1);
  const std::string json = R"({"emb":{"dtype":"F32","shape":[2,2],"data_offsets":[16,0]}})";
  EXPECT_THAT(Open("t.safetensors", SafetensorsFromHeader(json, data)),
              Defect(Path("t.safetensors"), "invalid data_offsets"));
}

TEST_F(TableSourceTest, SafetensorsTensorWithoutDataOffsets) {
  const std::string json = R"({"emb":{"dtype":"F32","shape":[2,2]}})";
  EXPECT_THAT(
      Open("t.safetensors", SafetensorsFromHeader(json, RandomRows(DataType::kFloat32, 4, 1))),
      Defect(Path("t.safetensors"), "lacks dtype, shape or data_offsets"));
}

TEST_F(TableSourceTest, NpyRank1) {
  EXPECT_THAT(Open("t.npy", NpyFile("<f4", {6}, RandomRows(DataType::kFloat32, 6, 1))),
              Defect(Path("t.npy"), "rank 1"));
}

TEST_F(TableSourceTest, NpyRank3) {
  EXPECT_THAT(Open("t.npy", NpyFile("<f4", {2, 3, 4}, RandomRows(DataType::kFloat32, 24, 1))),
              Defect(Path("t.npy"), "rank 3"));
}

TEST_F(TableSourceTest, SafetensorsRank1) {
  EXPECT_THAT(Open("t.safetensors",
                   SafetensorsFile({{"emb", "F32", {6}, RandomRows(DataType::kFloat32, 6, 1)}})),
              Defect(Path("t.safetensors"), "rank 1"));
}

TEST_F(TableSourceTest, SafetensorsRank3) {
  EXPECT_THAT(
      Open("t.safetensors",
           SafetensorsFile({{"emb", "F32", {2, 3, 4}, RandomRows(DataType::kFloat32, 24, 1)}})),
      Defect(Path("t.safetensors"), "rank 3"));
}

TEST_F(TableSourceTest, NpyZeroDim) {
  EXPECT_THAT(Open("t.npy", NpyFile("<f4", {5, 0}, "")),
              Defect(Path("t.npy"), "zero or negative dimension"));
}

TEST_F(TableSourceTest, NpyZeroRows) {
  EXPECT_THAT(Open("t.npy", NpyFile("<f4", {0, 5}, "")),
              Defect(Path("t.npy"), "zero or negative dimension"));
}

TEST_F(TableSourceTest, NpyNegativeDim) {
  EXPECT_THAT(Open("t.npy", NpyFile("<f4", {-2, 5}, RandomRows(DataType::kFloat32, 10, 1))),
              Defect(Path("t.npy"), "zero or negative dimension"));
}

TEST_F(TableSourceTest, SafetensorsZeroDim) {
  EXPECT_THAT(Open("t.safetensors", SafetensorsFile({{"emb", "F32", {5, 0}, ""}})),
              Defect(Path("t.safetensors"), "zero or negative dimension"));
}

TEST_F(TableSourceTest, SafetensorsZeroRows) {
  EXPECT_THAT(Open("t.safetensors", SafetensorsFile({{"emb", "F32", {0, 5}, ""}})),
              Defect(Path("t.safetensors"), "zero or negative dimension"));
}

TEST_F(TableSourceTest, NpyFloat64IsUnsupported) {
  EXPECT_THAT(Open("t.npy", NpyFile("<f8", {2, 2}, RandomRows(DataType::kFloat32, 8, 1))),
              Defect(Path("t.npy"), "unsupported dtype '<f8'"));
}

TEST_F(TableSourceTest, NpyInt32IsUnsupported) {
  EXPECT_THAT(Open("t.npy", NpyFile("<i4", {2, 2}, RandomRows(DataType::kFloat32, 4, 1))),
              Defect(Path("t.npy"), "unsupported dtype '<i4'"));
}

TEST_F(TableSourceTest, NpyBigEndianFloat32IsUnsupported) {
  EXPECT_THAT(Open("t.npy", NpyFile(">f4", {2, 2}, RandomRows(DataType::kFloat32, 4, 1))),
              Defect(Path("t.npy"), "unsupported dtype '>f4'"));
}

TEST_F(TableSourceTest, SafetensorsInt64IsUnsupported) {
  EXPECT_THAT(Open("t.safetensors",
                   SafetensorsFile({{"emb", "I64", {2, 2}, RandomRows(DataType::kFloat32, 8, 1)}})),
              Defect(Path("t.safetensors"), "unsupported dtype I64"));
}

TEST_F(TableSourceTest, SafetensorsFloat64IsUnsupported) {
  EXPECT_THAT(Open("t.safetensors",
                   SafetensorsFile({{"emb", "F64", {2, 2}, RandomRows(DataType::kFloat32, 8, 1)}})),
              Defect(Path("t.safetensors"), "unsupported dtype F64"));
}

TEST_F(TableSourceTest, NpyFortranOrderIsUnsupported) {
  const std::string bytes = NpyHeader(NpyDict("<f4", {2, 2}, /*fortran_order=*/true)) +
                            RandomRows(DataType::kFloat32, 4, 1);
  EXPECT_THAT(Open("t.npy", bytes), Defect(Path("t.npy"), "fortran_order is True"));
}

TEST_F(TableSourceTest, NpySizeThatOverflows) {
  EXPECT_THAT(
      Open("t.npy", NpyFile("<f4", {kTwoTo62, kTwoTo62}, RandomRows(DataType::kFloat32, 4, 1))),
      Defect(Path("t.npy"), "overflows"));
}

TEST_F(TableSourceTest, NpyByteCountThatOverflows) {
  // rows * dim fits in 64 bits; times the element size it does not.
  EXPECT_THAT(Open("t.npy", NpyFile("<f4", {kTwoTo62, 2}, RandomRows(DataType::kFloat32, 4, 1))),
              Defect(Path("t.npy"), "overflows"));
}

TEST_F(TableSourceTest, NpyShapeEntryBeyondInt64) {
  const std::string bytes =
      NpyHeader("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999, 2), }") +
      RandomRows(DataType::kFloat32, 4, 1);
  EXPECT_THAT(Open("t.npy", bytes), Defect(Path("t.npy"), "overflows"));
}

TEST_F(TableSourceTest, SafetensorsSizeThatOverflows) {
  const std::string json = absl::StrCat(R"({"emb":{"dtype":"F32","shape":[)", kTwoTo62, ",",
                                        kTwoTo62, R"(],"data_offsets":[0,16]}})");
  EXPECT_THAT(
      Open("t.safetensors", SafetensorsFromHeader(json, RandomRows(DataType::kFloat32, 4, 1))),
      Defect(Path("t.safetensors"), "overflows"));
}

TEST_F(TableSourceTest, SafetensorsSeveralTensorsNeedAName) {
  const std::string file =
      SafetensorsFile({{"a", "F32", {2, 2}, RandomRows(DataType::kFloat32, 4, 1)},
                       {"b", "F32", {2, 2}, RandomRows(DataType::kFloat32, 4, 2)}});
  EXPECT_THAT(Open("t.safetensors", file),
              AllOf(Defect(Path("t.safetensors"), "holds 2 tensors (a, b)"),
                    Defect(Path("t.safetensors"), "#TENSOR")));
}

TEST_F(TableSourceTest, SafetensorsUnknownTensor) {
  const std::string file =
      SafetensorsFile({{"a", "F32", {2, 2}, RandomRows(DataType::kFloat32, 4, 1)}});
  EXPECT_THAT(Open("t.safetensors", file, "zz"),
              Defect(Path("t.safetensors"), "no tensor named 'zz'"));
}

TEST_F(TableSourceTest, SafetensorsMetadataIsNotATensor) {
  const std::string json = R"({"__metadata__":{"format":"pt"},)"
                           R"("weight":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]}})";
  EXPECT_THAT(
      Open("t.safetensors", SafetensorsFromHeader(json, RandomRows(DataType::kFloat32, 4, 1)),
           "__metadata__"),
      Defect(Path("t.safetensors"), "no tensor named '__metadata__'"));
}

TEST_F(TableSourceTest, TensorNameOnAnNpy) {
  EXPECT_THAT(Open("t.npy", NpyFile("<f4", {2, 2}, RandomRows(DataType::kFloat32, 4, 1)), "x"),
              Defect(Path("t.npy"), "#TENSOR applies only to .safetensors"));
}

TEST_F(TableSourceTest, UnknownExtension) {
  EXPECT_THAT(Open("t.bin", NpyFile("<f4", {2, 2}, RandomRows(DataType::kFloat32, 4, 1))),
              Defect(Path("t.bin"), "unknown format"));
}

TEST_F(TableSourceTest, DirectoryIsNotARegularFile) {
  EXPECT_THAT(TableSource::Open(TableSpec{"t", dir_.path(), "", {}}),
              Defect(dir_.path(), "not a regular file"));
}

// --- ParseTableSpec -----------------------------------------------------------------------------

TEST(ParseTableSpec, NameAndPath) {
  auto spec = ParseTableSpec("users=/data/users.npy");
  ASSERT_THAT(spec, IsOk());
  EXPECT_EQ(spec->name, "users");
  EXPECT_EQ(spec->path, "/data/users.npy");
  EXPECT_EQ(spec->tensor, "");
}

TEST(ParseTableSpec, NameWithTensor) {
  auto spec = ParseTableSpec("items=/data/model.safetensors#emb.weight");
  ASSERT_THAT(spec, IsOk());
  EXPECT_EQ(spec->name, "items");
  EXPECT_EQ(spec->path, "/data/model.safetensors");
  EXPECT_EQ(spec->tensor, "emb.weight");
}

TEST(ParseTableSpec, OnlyTheLastHashStartsTheTensor) {
  auto spec = ParseTableSpec("t=/data/run#3/model.safetensors#w");
  ASSERT_THAT(spec, IsOk());
  EXPECT_EQ(spec->path, "/data/run#3/model.safetensors");
  EXPECT_EQ(spec->tensor, "w");
}

TEST(ParseTableSpec, PathMayContainEquals) {
  auto spec = ParseTableSpec("t=/data/a=b.npy");
  ASSERT_THAT(spec, IsOk());
  EXPECT_EQ(spec->name, "t");
  EXPECT_EQ(spec->path, "/data/a=b.npy");
}

TEST(ParseTableSpec, RejectsMissingParts) {
  for (const char* flag : {"", "users", "/data/users.npy", "=/data/users.npy", "users="}) {
    EXPECT_THAT(ParseTableSpec(flag),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("NAME=PATH")))
        << "flag '" << flag << "'";
  }
}

// An empty path before '#' is a missing path.
TEST(ParseTableSpec, RejectsMissingPathBeforeTensor) {
  EXPECT_THAT(ParseTableSpec("users=#emb"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("NAME=PATH")));
}

// Names reach ListTables (a proto string), the logs and Prometheus label values: printable UTF-8
// only, else the server would start and then fail every ListTables and every scrape.
TEST(ParseTableSpec, RejectsNamesThatAreNotPrintableUtf8) {
  for (const std::string& name :
       {std::string("bad\xff"), std::string("\xc3"), std::string("\xc0\xaf"),  // overlong '/'
        std::string("\xed\xa0\x80"),                                           // a surrogate
        std::string("tab\tname"), std::string("nul\0x", 5), std::string(257, 'a')}) {
    EXPECT_THAT(ParseTableSpec(name + "=/data/t.npy"),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--table: table name")))
        << absl::CHexEscape(name);
  }
}

TEST(ParseTableSpec, AcceptsPrintableUtf8Names) {
  for (const std::string& name :
       {std::string("items"), std::string("\xc3\xa9l\xc3\xa8ve"), std::string("\xe5\x90\x8d"),
        std::string("\xf0\x9f\x98\x80"), std::string(256, 'a')}) {
    auto spec = ParseTableSpec(name + "=/data/t.npy");
    ASSERT_THAT(spec, IsOk()) << absl::CHexEscape(name);
    EXPECT_EQ(spec->name, name);
  }
}

// --- Quantized tables ---------------------------------------------------------------------------

TEST(ParseTableSpec, QuantizeOption) {
  auto spec = ParseTableSpec("t=/data/a,b.safetensors#w,quantize=int4");
  ASSERT_THAT(spec, IsOk());
  EXPECT_EQ(spec->path, "/data/a,b.safetensors");
  EXPECT_EQ(spec->tensor, "w");
  EXPECT_EQ(spec->quantize, DataType::kInt4Rowwise);
  EXPECT_EQ(ParseTableSpec("t=/x.npy,quantize=int8")->quantize, DataType::kInt8Rowwise);
  EXPECT_EQ(ParseTableSpec("t=/x.npy")->quantize, std::nullopt);
  EXPECT_THAT(ParseTableSpec("t=/x.npy,quantize=int3").status().message(),
              HasSubstr("quantize=int3 is not int8 or int4"));
}

// --- Placement options (the host tier) -----------------------------------------------------------

TEST(ParseTableSpec, GpuBudgetInBytesOrWithABinaryUnit) {
  const std::pair<const char*, size_t> cases[] = {
      {"1048576", size_t{1} << 20}, {"1", 1},
      {"512K", size_t{512} << 10},  {"1M", size_t{1} << 20},
      {"4G", size_t{4} << 30},      {"2T", size_t{2} << 40},
      {"3g", size_t{3} << 30}};
  for (const auto& [text, bytes] : cases) {
    auto spec = ParseTableSpec(absl::StrCat("t=/data/x.npy,gpu_budget=", text));
    ASSERT_THAT(spec, IsOk()) << text;
    EXPECT_EQ(spec->gpu_budget_bytes, bytes) << text;
    EXPECT_EQ(spec->path, "/data/x.npy");
  }
  EXPECT_EQ(ParseTableSpec("t=/data/x.npy")->gpu_budget_bytes, 0u);  // none of its own
}

TEST(ParseTableSpec, HotIdsPathMayHoldCommasAndHashes) {
  auto spec = ParseTableSpec("t=/data/x.npy,hot_ids=/data/hot,2#b.npy");
  ASSERT_THAT(spec, IsOk());
  EXPECT_EQ(spec->path, "/data/x.npy");
  EXPECT_EQ(spec->tensor, "");
  EXPECT_EQ(spec->hot_ids_path, "/data/hot,2#b.npy");
  EXPECT_EQ(ParseTableSpec("t=/data/x.npy")->hot_ids_path, "");
}

TEST(ParseTableSpec, OptionsInAnyOrder) {
  for (const char* options : {",quantize=int8,gpu_budget=2M,hot_ids=/h/a,b.npy",
                              ",hot_ids=/h/a,b.npy,quantize=int8,gpu_budget=2M",
                              ",gpu_budget=2M,hot_ids=/h/a,b.npy,quantize=int8"}) {
    auto spec = ParseTableSpec(absl::StrCat("t=/data/a,b.safetensors#w", options));
    ASSERT_THAT(spec, IsOk()) << options;
    EXPECT_EQ(spec->path, "/data/a,b.safetensors") << options;
    EXPECT_EQ(spec->tensor, "w") << options;
    EXPECT_EQ(spec->quantize, DataType::kInt8Rowwise) << options;
    EXPECT_EQ(spec->gpu_budget_bytes, size_t{2} << 20) << options;
    EXPECT_EQ(spec->hot_ids_path, "/h/a,b.npy") << options;
  }
}

// A comma followed by anything but a known option is part of the path, as before the options.
TEST(ParseTableSpec, UnknownOptionsArePartOfThePath) {
  auto spec = ParseTableSpec("t=/data/x.npy,gpu_bugdet=4G,quantize=int4");
  ASSERT_THAT(spec, IsOk());
  EXPECT_EQ(spec->path, "/data/x.npy,gpu_bugdet=4G");
  EXPECT_EQ(spec->quantize, DataType::kInt4Rowwise);
}

TEST(ParseTableSpec, RejectsAnOptionGivenTwice) {
  for (const char* flag : {"t=/x.npy,quantize=int8,quantize=int8",
                           "t=/x.npy,gpu_budget=1M,hot_ids=/h.npy,gpu_budget=2M",
                           "t=/x.npy,hot_ids=/a.npy,hot_ids=/b.npy"}) {
    EXPECT_THAT(ParseTableSpec(flag),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         AllOf(HasSubstr(absl::StrCat("--table=", flag, ": ")),
                               HasSubstr("is given twice; each option at most once"))))
        << flag;
  }
}

TEST(ParseTableSpec, RejectsABadGpuBudgetNamingIt) {
  const std::pair<const char*, const char*> cases[] = {
      {"0", "gpu_budget=0: the budget must be more than 0 bytes"},
      {"0G", "gpu_budget=0G: the budget must be more than 0 bytes"},
      {"abc", "gpu_budget 'abc' is not a size: it does not start with a digit"},
      {"4GB", "gpu_budget '4GB' is not a size: 'GB' is not a unit"},
      {"4X", "gpu_budget '4X' is not a size: 'X' is not a unit"},
      {"-1", "gpu_budget '-1' is not a size"},
      {"1.5G", "gpu_budget '1.5G' is not a size: '.5G' is not a unit"},
      {"9223372036854775808", "is over 2^63 - 1 bytes"},
      {"8388608T", "is over 2^63 - 1 bytes"},
  };
  for (const auto& [value, message] : cases) {
    const std::string flag = absl::StrCat("t=/x.npy,gpu_budget=", value);
    EXPECT_THAT(
        ParseTableSpec(flag),
        StatusIs(absl::StatusCode::kInvalidArgument,
                 AllOf(HasSubstr(absl::StrCat("--table=", flag, ": ")), HasSubstr(message))))
        << flag;
  }
}

TEST(ParseTableSpec, RejectsAnOptionWithoutAValue) {
  for (const char* option : {"quantize", "gpu_budget", "hot_ids"}) {
    EXPECT_THAT(ParseTableSpec(absl::StrCat("t=/x.npy,", option, "=,quantize=int8")),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         HasSubstr(absl::StrCat(option, "= has no value"))))
        << option;
  }
  EXPECT_THAT(ParseTableSpec("t=/x.npy,hot_ids="),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("hot_ids= has no value")));
}

TEST(ParseTableSpec, RejectsOptionsWithoutAPath) {
  EXPECT_THAT(ParseTableSpec("t=,gpu_budget=1M"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("the path is missing")));
  EXPECT_THAT(ParseTableSpec("t=#w,hot_ids=/h.npy"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("the path is missing")));
}

// The quantized rows a float32 file becomes, as QuantizeRow makes them.
std::string Quantized(const std::string& floats, int64_t rows, int64_t dim, DataType t) {
  std::string out(static_cast<size_t>(rows) * RowBytes(t, dim), '\0');
  EXPECT_THAT(EncodeRows(reinterpret_cast<const std::byte*>(floats.data()), DataType::kFloat32,
                         rows, dim, t, reinterpret_cast<std::byte*>(out.data())),
              IsOk());
  return out;
}

// --- Shards (issue 26) -------------------------------------------------------------------------

TEST(ParseShardSpec, TakesKOfN) {
  auto shard = ParseShardSpec("2/3", "--shard");
  ASSERT_THAT(shard, IsOk());
  EXPECT_EQ(shard->index, 2);
  EXPECT_EQ(shard->count, 3);
  // Blocks of ceil(rows / count): 1001 rows split 334, 334, 333.
  EXPECT_EQ(RowRange::Whole(1001).BlockRows(3), 334);
  EXPECT_EQ(shard->Of(1001), RowRange(668, 333, 1001));
  EXPECT_EQ((ShardSpec{0, 3}).Of(1001), RowRange(0, 334, 1001));
  // More shards than rows: the last ones hold none.
  EXPECT_EQ((ShardSpec{3, 4}).Of(3).count(), 0);
}

TEST(ParseShardSpec, RejectsWhatIsNotAShardNamingTheFlag) {
  const std::pair<const char*, const char*> cases[] = {
      {"", "expected K/N"},         {"3", "expected K/N"},           {"a/3", "expected K/N"},
      {"1/b", "expected K/N"},      {"3/3", "must be 0 to 2"},       {"-1/3", "must be 0 to 2"},
      {"0/0", "must be 1 to 4096"}, {"0/5000", "must be 1 to 4096"},
  };
  for (const auto& [text, message] : cases) {
    EXPECT_THAT(
        ParseShardSpec(text, "--shard"),
        StatusIs(absl::StatusCode::kInvalidArgument,
                 AllOf(HasSubstr(absl::StrCat("--shard=", text, ": ")), HasSubstr(message))))
        << text;
  }
}

TEST(ParseTableSpec, TakesAShardOption) {
  auto spec = ParseTableSpec("t=/data/x.npy,shard=1/4,quantize=int8");
  ASSERT_THAT(spec, IsOk());
  EXPECT_EQ(spec->path, "/data/x.npy");
  ASSERT_TRUE(spec->shard.has_value());
  EXPECT_EQ(*spec->shard, (ShardSpec{1, 4}));
  EXPECT_EQ(spec->quantize, DataType::kInt8Rowwise);
  EXPECT_FALSE(ParseTableSpec("t=/data/x.npy")->shard.has_value());
  EXPECT_THAT(
      ParseTableSpec("t=/x.npy,shard=4/4"),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("--table=t=/x.npy,shard=4/4: shard=4/4: the shard must be 0 to 3")));
}

TEST_F(TableSourceTest, AShardReadsOnlyItsRowsOfTheFile) {
  constexpr int64_t kRows = 10;
  constexpr int64_t kDim = 3;
  for (DataType t : {DataType::kFloat32, DataType::kInt8Rowwise}) {
    const std::string floats = RandomRows(DataType::kFloat32, kRows * kDim, 9);
    const std::string path = Path("shard.npy");
    ASSERT_THAT(WriteFile(path, NpyFile("<f4", {kRows, kDim}, floats)), IsOk());
    const std::string whole = t == DataType::kFloat32 ? floats : Quantized(floats, kRows, kDim, t);
    const size_t row = RowBytes(t, kDim);
    // 10 rows in blocks of 4: rows 0..3, 4..7, 8..9.
    for (int k = 0; k < 3; ++k) {
      TableSpec spec{"t", path, "",
                     t == DataType::kFloat32 ? std::nullopt : std::optional<DataType>(t)};
      spec.shard = ShardSpec{k, 3};
      auto source = TableSource::Open(spec);
      ASSERT_THAT(source, IsOk());
      const int64_t first = 4 * k;
      const int64_t rows = k < 2 ? 4 : 2;
      EXPECT_EQ((*source)->ids(), RowRange(first, rows, kRows));
      EXPECT_EQ((*source)->rows(), rows);
      EXPECT_EQ((*source)->bytes(), static_cast<size_t>(rows) * row);
      EXPECT_TRUE(ReadAllBytes(**source) ==
                  whole.substr(static_cast<size_t>(first) * row, static_cast<size_t>(rows) * row))
          << DataTypeName(t) << " shard " << k;
    }
  }
}

TEST(TableSourceDemo, AShardMakesTheWholeTablesRows) {
  auto whole = TableSource::Demo("d", 100, 6, 42);
  auto shard = TableSource::DemoShard("d", 100, 6, 42, ShardSpec{1, 3});
  ASSERT_THAT(shard, IsOk());
  EXPECT_EQ((*shard)->ids(), RowRange(34, 34, 100));
  const size_t row = 6 * sizeof(float);
  EXPECT_TRUE(ReadAllBytes(**shard) == ReadAllBytes(*whole).substr(34 * row, 34 * row));
  EXPECT_THAT(TableSource::DemoShard("d", 3, 6, 42, ShardSpec{3, 4}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("shard 3/4 of table 'd' (demo(seed=42)) holds no rows")));
}

TEST_F(TableSourceTest, QuantizesAFloatTableAsItLoadsInAnyChunks) {
  for (DataType t : kQuantizedTypes) {
    for (int64_t dim : {1, 7, 64}) {
      const std::string floats = RandomRows(DataType::kFloat32, 37 * dim, 5);
      const std::string path = Path(absl::StrCat("q", dim, ".npy"));
      ASSERT_THAT(WriteFile(path, NpyFile("<f4", {37, dim}, floats)), IsOk());
      auto source = TableSource::Open(TableSpec{"t", path, "", t});
      ASSERT_THAT(source, IsOk());
      const TableSource& s = **source;
      EXPECT_EQ(s.dtype(), t);
      EXPECT_EQ(s.stored_dtype(), DataType::kFloat32);
      EXPECT_EQ(s.bytes(), 37 * RowBytes(t, dim));
      const std::string want = Quantized(floats, 37, dim, t);
      EXPECT_TRUE(ReadAllBytes(s) == want) << DataTypeName(t) << " dim " << dim;
      // Chunks that start and end inside rows, as the GPU upload reads them.
      std::string chunked(want.size(), '\0');
      for (size_t at = 0; at < want.size(); at += 29) {
        const size_t n = std::min<size_t>(29, want.size() - at);
        ASSERT_THAT(
            s.Read(at, absl::MakeSpan(reinterpret_cast<std::byte*>(chunked.data()) + at, n)),
            IsOk());
      }
      EXPECT_TRUE(chunked == want) << DataTypeName(t) << " dim " << dim;
    }
  }
}

TEST_F(TableSourceTest, OpensAQuantizedSafetensorsTable) {
  const std::string floats = RandomRows(DataType::kFloat32, 6 * 13, 2);
  for (DataType t : kQuantizedTypes) {
    const std::string rows = Quantized(floats, 6, 13, t);
    const std::string header =
        absl::StrCat("{\"__metadata__\":{\"emb_layout\":\"", DataTypeName(t),
                     "\",\"emb_dim\":\"13\"},"
                     "\"w\":{\"dtype\":\"U8\",\"shape\":[6,",
                     RowBytes(t, 13), "],\"data_offsets\":[0,", rows.size(), "]}}");
    auto source = Open("q.safetensors", SafetensorsFromHeader(header, rows));
    ASSERT_THAT(source, IsOk());
    EXPECT_EQ((*source)->dtype(), t);
    EXPECT_EQ((*source)->dim(), 13);
    EXPECT_TRUE(ReadAllBytes(**source) == rows);
  }
  // Without the layout a U8 tensor is no table; with rows of the wrong size it is refused.
  const std::string rows = Quantized(floats, 6, 13, DataType::kInt8Rowwise);
  EXPECT_THAT(Open("u8.safetensors", SafetensorsFile({{"w", "U8", {6, 21}, rows}})),
              Defect(Path("u8.safetensors"), "unsupported dtype U8"));
  const std::string header = absl::StrCat(
      "{\"__metadata__\":{\"emb_layout\":\"int8_rowwise\",\"emb_dim\":\"12\"},\"w\":{\"dtype\":"
      "\"U8\",\"shape\":[6,21],\"data_offsets\":[0,",
      rows.size(), "]}}");
  EXPECT_THAT(Open("bad.safetensors", SafetensorsFromHeader(header, rows)),
              Defect(Path("bad.safetensors"), "rows of 21 bytes are not int8_rowwise rows of 12"));
}

// A saved version's sequence lies below 2^62, as every update's (service/common/update_sequence.h):
// a file that says otherwise would leave its table no room for an update.
TEST_F(TableSourceTest, ASequenceInTheMetadataFromTheLimitOnIsADefect) {
  const std::string rows = RandomRows(DataType::kFloat32, 2 * 2, 3);
  auto file = [&](const std::string& sequence) {
    return SafetensorsFromHeader(
        absl::StrCat("{\"__metadata__\":{\"emb_sequence\":\"", sequence,
                     "\"},\"w\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,",
                     rows.size(), "]}}"),
        rows);
  };
  auto source = Open("below.safetensors", file("4611686018427387903"));
  ASSERT_THAT(source, IsOk());
  EXPECT_EQ((*source)->sequence(), 4611686018427387903);
  for (const char* sequence : {"4611686018427387904", "9223372036854775807"}) {
    EXPECT_THAT(Open("at.safetensors", file(sequence)),
                Defect(Path("at.safetensors"),
                       "__metadata__.emb_sequence is not a non-negative integer in a string below "
                       "4611686018427387904 (2^62"));
  }
}

TEST_F(TableSourceTest, ARowThatCannotBeQuantizedIsNamedWhenRead) {
  std::string floats = RandomRows(DataType::kFloat32, 4 * 3, 2);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::memcpy(floats.data() + (2 * 3 + 1) * 4, &nan, 4);  // row 2
  const std::string path = Path("nan.npy");
  ASSERT_THAT(WriteFile(path, NpyFile("<f4", {4, 3}, floats)), IsOk());
  auto source = TableSource::Open(TableSpec{"t", path, "", DataType::kInt8Rowwise});
  ASSERT_THAT(source, IsOk());
  std::vector<std::byte> all((*source)->bytes());
  const absl::Status s = (*source)->Read(0, absl::MakeSpan(all));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("row 2: element 1 is nan"));
  // A table stored quantized is not quantized again.
  const std::string q =
      Quantized(RandomRows(DataType::kFloat32, 6, 1), 2, 3, DataType::kInt8Rowwise);
  const std::string qpath = Path("q8.safetensors");
  ASSERT_THAT(
      WriteFile(qpath, SafetensorsFromHeader(
                           absl::StrCat("{\"__metadata__\":{\"emb_layout\":\"int8_rowwise\"},"
                                        "\"w\":{\"dtype\":\"U8\",\"shape\":[2,11],"
                                        "\"data_offsets\":[0,",
                                        q.size(), "]}}"),
                           q)),
      IsOk());
  EXPECT_THAT(
      TableSource::Open(TableSpec{"t", qpath, "", DataType::kInt4Rowwise}).status().message(),
      HasSubstr("cannot be quantized again"));
}

}  // namespace
}  // namespace emb::service::table_source_test
