// MultiDeviceStore against one store of the whole table, on random tables: every table and
// answer type, rows split over two and three parts (uneven blocks), bags, updates, reads and
// versions, replicas sharing batches, and batches from many threads at once. The parts are two
// CPU stores everywhere; where this build has CUDA and a GPU is visible, also two stores on
// cuda:0 and a GPU beside the CPU (the two-GPU host runs the same test over cuda:0,cuda:1 with
// EMB_TEST_DEVICES). A parameter that finds no GPU skips, saying why.
#include "service/store/multi_device_store.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "service/store/device.h"
#include "service/store/store_factory.h"
#include "service/tables/table_source.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/table_files.h"

namespace emb::service::multi_device_store_test {
namespace {

using ::emb::testing::IsOk;
using ::emb::testing::StatusIs;
using ::testing::HasSubstr;

constexpr DataType kTableTypes[] = {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16,
                                    DataType::kInt8Rowwise, DataType::kInt4Rowwise};
constexpr DataType kOutTypes[] = {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16};

// One caller's rows of a batch, filled with 0xa5 so that a row left unwritten shows.
struct Answer {
  std::vector<std::vector<std::byte>> buffers;
  std::vector<AnswerSpan> spans;
  std::string Bytes() const {
    std::string all;
    for (const auto& b : buffers) {
      all.append(reinterpret_cast<const char*>(b.data()), b.size());
    }
    return all;
  }
};

// Runs `batch` on `store` into answers of `callers` callers (the answer rows split as evenly as
// whole rows allow, none holding both plain and pooled rows) and waits for it.
absl::StatusOr<std::string> RunBatch(EmbeddingStore& store, LookUpBatch batch, int callers = 1) {
  const size_t row_bytes = static_cast<size_t>(store.info().dim) * ElementSize(batch.out_type);
  Answer answer;
  const size_t plain = batch.plain_ids();
  const size_t rows = batch.answer_rows();
  // Split [0, plain) and [plain, rows) each into up to `callers` spans.
  for (const auto& [first, count] : {std::pair{size_t{0}, plain}, std::pair{plain, rows - plain}}) {
    (void)first;
    size_t left = count;
    for (int c = 0; c < callers && left > 0; ++c) {
      const size_t n = c + 1 == callers ? left : std::max<size_t>(1, left / callers);
      answer.buffers.emplace_back(n * row_bytes, std::byte{0xa5});
      left -= n;
    }
  }
  for (auto& b : answer.buffers) {
    answer.spans.push_back(AnswerSpan{absl::MakeSpan(b), nullptr});
  }
  batch.outs = answer.spans;
  absl::Status status;
  absl::Notification done;
  store.LookUp(batch, [&](const absl::Status& s, const StageTimes&) {
    status = s;
    done.Notify();
  });
  done.WaitForNotification();
  if (!status.ok()) {
    return status;
  }
  return answer.Bytes();
}

absl::StatusOr<std::string> Gather(EmbeddingStore& store, const std::vector<int64_t>& ids,
                                   DataType out_type, int callers = 1) {
  LookUpBatch batch;
  batch.ids = ids;
  batch.out_type = out_type;
  return RunBatch(store, batch, callers);
}

std::vector<int64_t> RandomIds(size_t n, int64_t rows, std::mt19937_64& rng) {
  std::vector<int64_t> ids(n);
  for (int64_t& id : ids) {
    id = static_cast<int64_t>(rng() % static_cast<uint64_t>(rows));
  }
  return ids;
}

// The devices a parameter names: "cpu,cpu", "cuda:0,cuda:0", "cuda:0,cpu", or EMB_TEST_DEVICES
// for "env"; nullopt (with why) where they are not here.
std::optional<std::vector<Device>> DevicesFor(const std::string& param, std::string* why) {
  std::string list = param;
  if (param == "env") {
    const char* env = std::getenv("EMB_TEST_DEVICES");
    if (env == nullptr || *env == '\0') {
      *why = "EMB_TEST_DEVICES is not set (the two-GPU host sets cuda:0,cuda:1)";
      return std::nullopt;
    }
    list = env;
  }
  absl::StatusOr<std::vector<Device>> devices = ResolveDevices(list);
  if (!devices.ok()) {
    *why = std::string(devices.status().message());
    return std::nullopt;
  }
  return *devices;
}

class MultiDeviceStoreTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    std::string why;
    std::optional<std::vector<Device>> devices = DevicesFor(GetParam(), &why);
    if (!devices.has_value()) {
      GTEST_SKIP() << GetParam() << ": " << why;
    }
    devices_ = *devices;
    options_.max_batch_ids = 8192;
    options_.inflight_batches = 2;
  }

  // A rows x dim table of `type` with random values (a float32 file quantized as it loads for
  // the quantized types).
  std::unique_ptr<TableSource> RandomTable(DataType type, int64_t rows, int64_t dim,
                                           uint64_t seed) {
    const bool quantized = IsQuantized(type);
    const DataType file_type = quantized ? DataType::kFloat32 : type;
    const std::string data = emb::testing::RandomRows(file_type, rows * dim, seed);
    std::string path = dir_.File(absl::StrCat("t", files_++, ".safetensors"));
    const char* dtype = file_type == DataType::kFloat32   ? "F32"
                        : file_type == DataType::kFloat16 ? "F16"
                                                          : "BF16";
    EXPECT_THAT(emb::testing::WriteFile(
                    path, emb::testing::SafetensorsFile(
                              {emb::testing::SafetensorsTensor{"t", dtype, {rows, dim}, data}})),
                IsOk());
    TableSpec spec;
    spec.name = "t";
    spec.path = path;
    if (quantized) {
      spec.quantize = type;
    }
    auto source = TableSource::Open(spec);
    EXPECT_THAT(source.status(), IsOk());
    return std::move(*source);
  }

  // The table on one CPU store: the reference.
  std::unique_ptr<EmbeddingStore> OneDevice(const TableSource& source) {
    auto store = CreateStore(source, Device{}, options_);
    EXPECT_THAT(store.status(), IsOk());
    return std::move(*store);
  }

  // The table over `parts` of this parameter's devices (cycled), placed as `placement`.
  absl::StatusOr<std::unique_ptr<MultiDeviceStore>> Multi(const TableSource& source,
                                                          Placement placement, int parts = 2) {
    std::vector<Device> devices;
    std::vector<std::string> names;
    for (int k = 0; k < parts; ++k) {
      devices.push_back(devices_[k % devices_.size()]);
      names.push_back(devices.back().name());
    }
    return MultiDeviceStore::Create(
        source, placement, names,
        [&](const TableSource& part, int k) { return CreateStore(part, devices[k], options_); },
        RowAssemblyOn(devices, options_));
  }

  std::vector<Device> devices_;
  StoreOptions options_;
  emb::testing::TempDir dir_;
  int files_ = 0;
};

TEST_P(MultiDeviceStoreTest, RowsAndReplicasAnswerAsOneDeviceForEveryTypePair) {
  std::mt19937_64 rng(7);
  for (DataType table_type : kTableTypes) {
    for (int64_t dim : {8, 33}) {
      const int64_t rows = 1001;  // blocks of 501 and 500, or 334, 334 and 333
      auto source = RandomTable(table_type, rows, dim, rows + dim);
      auto one = OneDevice(*source);
      for (auto [placement, parts] :
           {std::pair{Placement::kRowSharded, 2}, std::pair{Placement::kRowSharded, 3},
            std::pair{Placement::kReplicated, 2}}) {
        SCOPED_TRACE(absl::StrCat(DataTypeName(table_type), " dim ", dim, " ",
                                  PlacementName(placement), " x", parts));
        auto multi = Multi(*source, placement, parts);
        ASSERT_THAT(multi.status(), IsOk());
        const TableInfo& info = (*multi)->info();
        EXPECT_EQ(info.rows, rows);
        EXPECT_EQ(info.placement, placement);
        ASSERT_EQ(info.parts.size(), static_cast<size_t>(parts));
        for (DataType out_type : kOutTypes) {
          std::vector<int64_t> ids = RandomIds(2000, rows, rng);
          ids[0] = 0;
          ids[1] = rows - 1;
          ids[2] = 500;  // the blocks' edges
          ids[3] = 501;
          ids[4] = ids[5];  // an id twice
          absl::StatusOr<std::string> want = Gather(*one, ids, out_type);
          ASSERT_THAT(want.status(), IsOk());
          absl::StatusOr<std::string> got = Gather(**multi, ids, out_type, /*callers=*/3);
          ASSERT_THAT(got.status(), IsOk());
          EXPECT_TRUE(*got == *want) << DataTypeName(out_type) << ": the answers differ";
        }
      }
    }
  }
}

TEST_P(MultiDeviceStoreTest, RowSplitSaysWhereEachPartIs) {
  auto source = RandomTable(DataType::kFloat32, 10, 4, 1);
  auto multi = Multi(*source, Placement::kRowSharded, 3);
  ASSERT_THAT(multi.status(), IsOk());
  const TableInfo& info = (*multi)->info();
  ASSERT_EQ(info.parts.size(), 3u);
  // Blocks of ceil(10 / 3) = 4 rows: 0..3, 4..7, 8..9.
  EXPECT_EQ(info.parts[0].ids, RowRange(0, 4, 10));
  EXPECT_EQ(info.parts[1].ids, RowRange(4, 4, 10));
  EXPECT_EQ(info.parts[2].ids, RowRange(8, 2, 10));
  EXPECT_EQ((*multi)->OwnerOf(3), 0);
  EXPECT_EQ((*multi)->OwnerOf(4), 1);
  EXPECT_EQ((*multi)->OwnerOf(9), 2);
  EXPECT_EQ(info.device, absl::StrCat(info.parts[0].device, ",", info.parts[1].device, ",",
                                      info.parts[2].device));
  // The parts' memory, and on GPUs the memory the answers are put together in.
  size_t device_bytes = 0;
  bool all_gpus = true;
  for (const DevicePart& part : info.parts) {
    device_bytes += part.device_bytes;
    all_gpus = all_gpus && part.device != "cpu";
  }
  EXPECT_EQ((*multi)->assembly_bytes() > 0, all_gpus);
  EXPECT_EQ(info.device_bytes, device_bytes + (*multi)->assembly_bytes());
}

TEST_P(MultiDeviceStoreTest, PooledBagsOverSplitRowsAnswerAsOneDevice) {
  std::mt19937_64 rng(11);
  for (DataType table_type : {DataType::kFloat32, DataType::kBFloat16, DataType::kInt8Rowwise}) {
    const int64_t rows = 777;
    const int64_t dim = 24;
    auto source = RandomTable(table_type, rows, dim, 3);
    auto one = OneDevice(*source);
    auto multi = Multi(*source, Placement::kRowSharded, 3);
    ASSERT_THAT(multi.status(), IsOk());
    // Plain ids first, then bags of 0, 1, odd and long lengths.
    const size_t plain = 5;
    std::vector<int64_t> offsets{static_cast<int64_t>(plain)};
    for (int64_t length : {0, 1, 7, 0, 300, 2, 33}) {
      offsets.push_back(offsets.back() + length);
    }
    std::vector<int64_t> ids = RandomIds(static_cast<size_t>(offsets.back()), rows, rng);
    std::vector<float> weights(ids.size());
    std::uniform_real_distribution<float> weight(-2.0f, 2.0f);
    for (float& w : weights) {
      w = weight(rng);
    }
    std::vector<float> scales;
    for (size_t b = 0; b + 1 < offsets.size(); ++b) {
      const int64_t length = offsets[b + 1] - offsets[b];
      scales.push_back(length == 0 ? 0.0f : 1.0f / static_cast<float>(length));
    }
    for (DataType out_type : kOutTypes) {
      for (int mode = 0; mode < 3; ++mode) {  // sum, weighted sum, mean
        SCOPED_TRACE(
            absl::StrCat(DataTypeName(table_type), " -> ", DataTypeName(out_type), " mode ", mode));
        LookUpBatch batch;
        batch.ids = ids;
        batch.out_type = out_type;
        batch.bags.offsets = offsets;
        if (mode == 1) {
          batch.bags.weights = weights;
        } else if (mode == 2) {
          batch.bags.scales = scales;
        }
        absl::StatusOr<std::string> want = RunBatch(*one, batch);
        ASSERT_THAT(want.status(), IsOk());
        absl::StatusOr<std::string> got = RunBatch(**multi, batch, /*callers=*/2);
        ASSERT_THAT(got.status(), IsOk());
        EXPECT_TRUE(*got == *want) << "the pooled answers differ";
      }
    }
  }
}

TEST_P(MultiDeviceStoreTest, BatchOfEmptyBagsAnswersZeros) {
  auto source = RandomTable(DataType::kFloat32, 100, 16, 5);
  auto multi = Multi(*source, Placement::kRowSharded);
  ASSERT_THAT(multi.status(), IsOk());
  std::vector<int64_t> ids;
  std::vector<int64_t> offsets{0, 0, 0};
  LookUpBatch batch;
  batch.ids = ids;
  batch.out_type = DataType::kFloat32;
  batch.bags.offsets = offsets;
  absl::StatusOr<std::string> got = RunBatch(**multi, batch);
  ASSERT_THAT(got.status(), IsOk());
  EXPECT_EQ(*got, std::string(2 * 16 * sizeof(float), '\0'));
}

TEST_P(MultiDeviceStoreTest, UpdatesReachTheOwnerOrEveryReplica) {
  std::mt19937_64 rng(13);
  const int64_t rows = 501;
  const int64_t dim = 16;
  for (DataType table_type : {DataType::kFloat32, DataType::kInt8Rowwise}) {
    for (Placement placement : {Placement::kRowSharded, Placement::kReplicated}) {
      SCOPED_TRACE(absl::StrCat(DataTypeName(table_type), " ", PlacementName(placement)));
      auto source = RandomTable(table_type, rows, dim, 17);
      auto one = OneDevice(*source);
      auto multi = Multi(*source, placement, 3);
      ASSERT_THAT(multi.status(), IsOk());
      // Ids in every part, one given twice (its last row wins).
      std::vector<int64_t> ids = {0, 166, 167, 168, 400, 500, 167};
      const std::string values =
          emb::testing::RandomRows(DataType::kFloat32, static_cast<int64_t>(ids.size()) * dim, 19);
      const auto bytes =
          absl::MakeConstSpan(reinterpret_cast<const std::byte*>(values.data()), values.size());
      absl::StatusOr<int64_t> want = one->UpdateRows(ids, DataType::kFloat32, bytes);
      ASSERT_THAT(want.status(), IsOk());
      absl::StatusOr<int64_t> got = (*multi)->UpdateRows(ids, DataType::kFloat32, bytes);
      ASSERT_THAT(got.status(), IsOk());
      EXPECT_EQ(*got, *want);
      EXPECT_EQ(*got, 6);
      // Every replica serves some of these batches.
      for (int i = 0; i < 6; ++i) {
        std::vector<int64_t> look = RandomIds(300, rows, rng);
        look.insert(look.end(), ids.begin(), ids.end());
        absl::StatusOr<std::string> a = Gather(*one, look, DataType::kFloat32);
        absl::StatusOr<std::string> b = Gather(**multi, look, DataType::kFloat32);
        ASSERT_THAT(a.status(), IsOk());
        ASSERT_THAT(b.status(), IsOk());
        EXPECT_TRUE(*a == *b) << "batch " << i << " differs after the update";
      }
      // The rows read back, from any offset across the parts' edges.
      const size_t table_bytes = source->bytes();
      std::string whole(table_bytes, '\0');
      std::string parts(table_bytes, '\0');
      ASSERT_THAT(one->ReadRows(
                      0, absl::MakeSpan(reinterpret_cast<std::byte*>(whole.data()), whole.size())),
                  IsOk());
      ASSERT_THAT((*multi)->ReadRows(
                      0, absl::MakeSpan(reinterpret_cast<std::byte*>(parts.data()), parts.size())),
                  IsOk());
      EXPECT_TRUE(whole == parts);
      const size_t row = RowBytes(table_type, dim);
      const size_t offset = 166 * row + 3;  // inside part 0, running into part 1
      std::string slice(row * 2, '\0');
      ASSERT_THAT(
          (*multi)->ReadRows(
              offset, absl::MakeSpan(reinterpret_cast<std::byte*>(slice.data()), slice.size())),
          IsOk());
      EXPECT_EQ(slice, whole.substr(offset, slice.size()));
      EXPECT_THAT((*multi)->ReadRows(table_bytes - 1,
                                     absl::MakeSpan(reinterpret_cast<std::byte*>(slice.data()), 2)),
                  StatusIs(absl::StatusCode::kOutOfRange));
    }
  }
}

TEST_P(MultiDeviceStoreTest, AnotherVersionSwapsInOnEveryPart) {
  std::mt19937_64 rng(23);
  for (Placement placement : {Placement::kRowSharded, Placement::kReplicated}) {
    auto source = RandomTable(DataType::kFloat16, 300, 12, 29);
    auto next = RandomTable(DataType::kFloat16, 300, 12, 31);
    auto multi = Multi(*source, placement);
    ASSERT_THAT(multi.status(), IsOk());
    auto prepared = (*multi)->PrepareTable(*next);
    ASSERT_THAT(prepared.status(), IsOk());
    ASSERT_THAT((*multi)->SwapTable(**prepared), IsOk());
    auto want = OneDevice(*next);
    for (int i = 0; i < 4; ++i) {
      const std::vector<int64_t> ids = RandomIds(500, 300, rng);
      absl::StatusOr<std::string> a = Gather(*want, ids, DataType::kFloat32);
      absl::StatusOr<std::string> b = Gather(**multi, ids, DataType::kFloat32);
      ASSERT_THAT(a.status(), IsOk());
      ASSERT_THAT(b.status(), IsOk());
      EXPECT_TRUE(*a == *b) << PlacementName(placement) << ": batch " << i;
    }
    // A version of another shape is refused, naming both.
    auto other = RandomTable(DataType::kFloat16, 301, 12, 37);
    EXPECT_THAT((*multi)->PrepareTable(*other).status(),
                StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("301")));
  }
}

TEST_P(MultiDeviceStoreTest, ReplicasShareTheBatches) {
  auto source = RandomTable(DataType::kFloat32, 200, 8, 41);
  auto multi = Multi(*source, Placement::kReplicated, 2);
  ASSERT_THAT(multi.status(), IsOk());
  std::atomic<int> served[2] = {0, 0};
  (*multi)->set_part_observer([&](int part, const StageTimes&, size_t ids) {
    served[part].fetch_add(static_cast<int>(ids));
  });
  std::mt19937_64 rng(43);
  for (int i = 0; i < 10; ++i) {
    ASSERT_THAT(Gather(**multi, RandomIds(10, 200, rng), DataType::kFloat32).status(), IsOk());
  }
  // One batch at a time: each finds both idle, and the search starts at each in turn.
  EXPECT_EQ(served[0].load(), 50);
  EXPECT_EQ(served[1].load(), 50);
}

TEST_P(MultiDeviceStoreTest, BatchesFromManyThreadsAtOnce) {
  auto source = RandomTable(DataType::kFloat32, 4099, 32, 47);
  auto one = OneDevice(*source);
  for (Placement placement : {Placement::kRowSharded, Placement::kReplicated}) {
    auto multi = Multi(*source, placement, 2);
    ASSERT_THAT(multi.status(), IsOk());
    std::atomic<int> wrong{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 6; ++t) {
      threads.emplace_back([&, t] {
        std::mt19937_64 rng(100 + t);
        for (int i = 0; i < 20; ++i) {
          const std::vector<int64_t> ids = RandomIds(1 + rng() % 3000, 4099, rng);
          absl::StatusOr<std::string> a = Gather(*one, ids, DataType::kBFloat16);
          absl::StatusOr<std::string> b = Gather(**multi, ids, DataType::kBFloat16, 2);
          if (!a.ok() || !b.ok() || *a != *b) {
            wrong.fetch_add(1);
          }
        }
      });
    }
    for (std::thread& t : threads) {
      t.join();
    }
    EXPECT_EQ(wrong.load(), 0) << PlacementName(placement);
  }
}

TEST_P(MultiDeviceStoreTest, RefusesWhatCannotBePlaced) {
  auto source = RandomTable(DataType::kFloat32, 2, 4, 53);
  // More parts than rows: the third block would hold none.
  EXPECT_THAT(Multi(*source, Placement::kRowSharded, 3).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("no rows")));
  EXPECT_THAT(Multi(*source, Placement::kRowSharded, 1).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("two or more devices")));
}

INSTANTIATE_TEST_SUITE_P(Devices, MultiDeviceStoreTest,
                         ::testing::Values("cpu,cpu", "cuda:0,cuda:0", "cuda:0,cpu", "env"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           const std::string& p = info.param;
                           return p == "cpu,cpu"         ? std::string("TwoCpuStores")
                                  : p == "cuda:0,cuda:0" ? std::string("TwoStoresOnCuda0")
                                  : p == "cuda:0,cpu"    ? std::string("Cuda0AndCpu")
                                                         : std::string("FromEnv");
                         });

TEST(ResolveDevicesTest, ListsAndRefusals) {
  absl::StatusOr<std::vector<Device>> two = ResolveDevices("cpu,cpu");
  ASSERT_THAT(two.status(), IsOk());
  EXPECT_EQ(two->size(), 2u);
  absl::StatusOr<std::vector<Device>> one = ResolveDevices("cpu");
  ASSERT_THAT(one.status(), IsOk());
  EXPECT_EQ(one->size(), 1u);
  EXPECT_THAT(ResolveDevices("cpu,gpu7").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--device=gpu7")));
  EXPECT_THAT(ResolveDevices("cpu,").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--device=:")));
}

}  // namespace
}  // namespace emb::service::multi_device_store_test
