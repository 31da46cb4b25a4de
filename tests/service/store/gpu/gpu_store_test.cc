// GpuStore against CpuStore on random tables: every table and answer dtype, odd dims, many
// batches in flight at once. Skips, saying why, where no GPU is visible.
#include "service/store/gpu/gpu_store.h"

#include <cuda_runtime_api.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <limits>
#include <memory>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/cpu_gather.h"
#include "service/store/cpu_store.h"
#include "service/store/gpu/host_tier.h"
#include "service/store/gpu/pinned_answer_memory.h"
#include "service/store/load_plan.h"
#include "service/tables/table_source.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/table_files.h"

namespace emb::service::gpu_store_test {
namespace {

using ::emb::testing::IsOk;
using ::emb::testing::StatusIs;
using ::testing::HasSubstr;

class GpuStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    int count = 0;
    const cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0) {
      GTEST_SKIP() << "no CUDA device visible (cudaGetDeviceCount: " << cudaGetErrorName(e) << ", "
                   << count << " devices)";
    }
  }

  // A rows x dim table of `type` with random nonzero values, as an .npy or .safetensors file.
  // With `quantize`, a float32 file quantized as it loads.
  std::unique_ptr<TableSource> RandomTable(DataType type, int64_t rows, int64_t dim,
                                           std::optional<DataType> quantize = std::nullopt) {
    const std::string data = emb::testing::RandomRows(type, rows * dim, /*seed=*/rows + dim);
    std::string path;
    if (type == DataType::kBFloat16) {
      path = dir_.File("t" + std::to_string(files_++) + ".safetensors");
      EXPECT_THAT(emb::testing::WriteFile(
                      path, emb::testing::SafetensorsFile(
                                {emb::testing::SafetensorsTensor{"t", "BF16", {rows, dim}, data}})),
                  IsOk());
    } else {
      path = dir_.File("t" + std::to_string(files_++) + ".npy");
      EXPECT_THAT(emb::testing::WriteFile(
                      path, emb::testing::NpyFile(type == DataType::kFloat32 ? "<f4" : "<f2",
                                                  {rows, dim}, data)),
                  IsOk());
    }
    auto source = TableSource::Open(TableSpec{"t", path, "", quantize});
    EXPECT_THAT(source.status(), IsOk());
    return std::move(*source);
  }

  emb::testing::TempDir dir_;
  int files_ = 0;
};

// Device 0's answer memory, as the server's pool for it would hand it out.
const PinnedAnswerMemory& Pinned() {
  static const auto* const pinned = new PinnedAnswerMemory(0);
  return *pinned;
}

// One caller's share of a batch: its ids, and whether its answer is in device 0's pinned answer
// memory (which the device sees) or in ordinary memory.
struct Share {
  size_t ids;
  bool pinned;
};

// An answer buffer of `bytes`, filled with 0xa5 so that a row left unwritten shows.
class OutBuffer {
 public:
  OutBuffer(size_t bytes, const HostAllocator* pinned) : bytes_(bytes), pinned_(pinned) {
    if (pinned_ != nullptr) {
      const HostBlock block = pinned_->Allocate(std::max<size_t>(bytes, 1));
      data_ = static_cast<std::byte*>(block.host);
      device_ = static_cast<std::byte*>(block.device);
    } else {
      pageable_.resize(bytes);
      data_ = pageable_.data();
    }
    std::memset(data_, 0xa5, bytes);
  }
  ~OutBuffer() {
    if (pinned_ != nullptr) {
      pinned_->Release(data_);
    }
  }
  OutBuffer(const OutBuffer&) = delete;
  OutBuffer& operator=(const OutBuffer&) = delete;
  // As the batcher hands it to the store: with its device address where it is pinned.
  AnswerSpan span() const { return AnswerSpan{absl::MakeSpan(data_, bytes_), device_}; }

 private:
  size_t bytes_;
  const HostAllocator* pinned_;
  std::vector<std::byte> pageable_;
  std::byte* data_ = nullptr;
  std::byte* device_ = nullptr;
};

// How one LookUp ended.
struct Answered {
  absl::Status status;
  StageTimes times;
};

// Runs one LookUp into `outs` and waits for its `done`.
Answered LookUpAndWait(EmbeddingStore& store, const std::vector<int64_t>& ids, DataType out_type,
                       const std::vector<AnswerSpan>& outs) {
  Answered answered;
  absl::Notification done;
  store.LookUp(ids, out_type, outs, [&](const absl::Status& s, const StageTimes& times) {
    answered = Answered{s, times};
    done.Notify();
  });
  done.WaitForNotification();
  return answered;
}

// `n` ids drawn uniformly from [0, rows) by a generator seeded with `seed`.
std::vector<int64_t> RandomIds(size_t n, int64_t rows, uint64_t seed) {
  std::vector<int64_t> ids(n);
  std::mt19937_64 rng(seed);
  for (int64_t& id : ids) {
    id = static_cast<int64_t>(rng() % static_cast<uint64_t>(rows));
  }
  return ids;
}

// Runs one LookUp whose callers are `shares` (empty: one caller in ordinary memory) and returns
// their rows, concatenated (or the error).
absl::StatusOr<std::string> Gather(EmbeddingStore& store, const std::vector<int64_t>& ids,
                                   DataType out_type, std::vector<Share> shares = {}) {
  if (shares.empty()) {
    shares.push_back(Share{ids.size(), false});
  }
  const size_t row_bytes = static_cast<size_t>(store.info().dim) * ElementSize(out_type);
  std::vector<std::unique_ptr<OutBuffer>> buffers;
  std::vector<AnswerSpan> outs;
  for (const Share& share : shares) {
    const HostAllocator* pinned = share.pinned ? &Pinned() : nullptr;
    buffers.push_back(std::make_unique<OutBuffer>(share.ids * row_bytes, pinned));
    outs.push_back(buffers.back()->span());
  }
  if (absl::Status status = LookUpAndWait(store, ids, out_type, outs).status; !status.ok()) {
    return status;
  }
  std::string rows;
  for (const AnswerSpan& out : outs) {
    rows.append(reinterpret_cast<const char*>(out.host.data()), out.host.size());
  }
  return rows;
}

TEST_F(GpuStoreTest, MatchesTheCpuStoreForEveryDtypePairAndOddDims) {
  StoreOptions options;
  options.max_batch_ids = 4096;
  options.inflight_batches = 2;
  std::mt19937_64 rng(1);
  // Every batch through the copy engines, then every batch through mapped pinned memory.
  for (size_t zero_copy_max_bytes : {size_t{0}, std::numeric_limits<size_t>::max()}) {
    options.zero_copy_max_bytes = zero_copy_max_bytes;
    for (DataType table_type : {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16}) {
      for (int64_t dim : {1, 3, 128, 300, 4097}) {
        const int64_t rows = dim > 1000 ? 64 : 1000;
        auto source = RandomTable(table_type, rows, dim);
        auto gpu = GpuStore::Create(*source, 0, options);
        ASSERT_THAT(gpu.status(), IsOk());
        auto cpu = CpuStore::Create(*source, options);
        ASSERT_THAT(cpu.status(), IsOk());
        EXPECT_EQ((*gpu)->info().device, "cuda:0");
        std::vector<int64_t> ids(dim > 1000 ? 300 : 4096);
        for (int64_t& id : ids) {
          id = static_cast<int64_t>(rng() % rows);
        }
        ids[0] = 0;
        ids[1] = rows - 1;
        ids[2] = ids[3];
        for (DataType out : {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16}) {
          auto got = Gather(**gpu, ids, out);
          auto want = Gather(**cpu, ids, out);
          ASSERT_THAT(got.status(), IsOk());
          ASSERT_THAT(want.status(), IsOk());
          EXPECT_TRUE(*got == *want)
              << DataTypeName(table_type) << " -> " << DataTypeName(out) << " dim " << dim
              << ", zero-copy up to " << zero_copy_max_bytes << " bytes";
        }
      }
    }
  }
}

// Completion threads that sleep between batches, then ones that poll for the next.
class GpuStorePollTest : public GpuStoreTest, public ::testing::WithParamInterface<int> {};

TEST_P(GpuStorePollTest, ManyBatchesInFlightEachGetTheirRows) {
  StoreOptions options;
  options.max_batch_ids = 2048;
  options.inflight_batches = 4;
  options.zero_copy_max_bytes = 256 << 10;  // answers of 4 bytes to 768 KB: both paths at once
  options.completion_poll = absl::Microseconds(GetParam());
  options.completion_poll_min_gap = absl::ZeroDuration();  // poll however close the batches
  auto source = RandomTable(DataType::kFloat32, 5000, 96);
  auto gpu = GpuStore::Create(*source, 0, options);
  ASSERT_THAT(gpu.status(), IsOk());
  auto cpu = CpuStore::Create(*source, options);
  ASSERT_THAT(cpu.status(), IsOk());
  constexpr int kThreads = 6;
  constexpr int kBatches = 50;
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(t);
      for (int b = 0; b < kBatches; ++b) {
        std::vector<int64_t> ids(1 + rng() % 2048);
        for (int64_t& id : ids) {
          id = static_cast<int64_t>(rng() % 5000);
        }
        const DataType out = static_cast<DataType>(1 + rng() % 3);
        // Up to three callers, each pinned or not, as the batcher would hand them over.
        std::vector<Share> shares;
        for (size_t left = ids.size(); left > 0;) {
          const size_t n = shares.size() == 2 ? left : 1 + rng() % left;
          shares.push_back(Share{n, rng() % 2 == 0});
          left -= n;
        }
        auto got = Gather(**gpu, ids, out, shares);
        auto want = Gather(**cpu, ids, out, shares);
        if (!got.ok() || !want.ok() || *got != *want) {
          ++wrong;
        }
      }
    });
  }
  for (auto& t : threads) {
    t.join();
  }
  EXPECT_EQ(wrong.load(), 0);
}

INSTANTIATE_TEST_SUITE_P(CompletionPollUs, GpuStorePollTest, ::testing::Values(0, 500));

// Callers whose answers are pinned and large get their rows from the device directly; the others
// (small, or in ordinary memory) through the slot's pinned buffer and a host copy. A batch mixing
// both, with the runs of staged callers between direct ones, through the copy engines and
// through zero-copy gathers, must give every caller exactly its rows.
TEST_F(GpuStoreTest, EveryCallerGetsItsRowsWhetherWrittenDirectlyOrStaged) {
  StoreOptions options;
  options.max_batch_ids = 2048;
  options.inflight_batches = 2;
  auto source = RandomTable(DataType::kFloat32, 3000, 128);  // 512-byte rows
  auto cpu = CpuStore::Create(*source, options);
  ASSERT_THAT(cpu.status(), IsOk());
  // With 64 KiB (128 float32 rows) the direct minimum: staged, direct, staged (ordinary memory,
  // large), direct, then a staged run of three (an empty caller, one row, seven pinned rows).
  const std::vector<Share> shares = {{3, true}, {200, true}, {150, false}, {130, true},
                                     {0, true}, {1, false},  {7, true}};
  const std::vector<int64_t> ids = RandomIds(491, 3000, 7);
  for (size_t zero_copy_max_bytes : {size_t{0}, std::numeric_limits<size_t>::max()}) {
    for (size_t direct_min : {size_t{64} << 10, size_t{0}}) {
      options.zero_copy_max_bytes = zero_copy_max_bytes;
      options.direct_answer_min_bytes = direct_min;
      auto gpu = GpuStore::Create(*source, 0, options);
      ASSERT_THAT(gpu.status(), IsOk());
      for (DataType out : {DataType::kFloat32, DataType::kFloat16}) {
        auto got = Gather(**gpu, ids, out, shares);
        auto want = Gather(**cpu, ids, out, shares);
        ASSERT_THAT(got.status(), IsOk());
        ASSERT_THAT(want.status(), IsOk());
        EXPECT_TRUE(*got == *want) << DataTypeName(out) << ", zero-copy up to "
                                   << zero_copy_max_bytes << " bytes, direct from " << direct_min;
      }
    }
  }
}

// Spans anywhere inside one of the pinned answer memory's blocks, with their device addresses,
// are written by the device in place, with no host copy, through the copy engines and through
// zero-copy gathers; a span in ordinary memory is staged. The store takes the device address the
// batch brings and asks neither the driver nor a registry, so this pins down which spans it
// writes in place.
TEST_F(GpuStoreTest, SpansWithADeviceAddressAreWrittenInPlace) {
  StoreOptions options;
  options.max_batch_ids = 1024;
  options.direct_answer_min_bytes = 4096;
  auto source = RandomTable(DataType::kFloat32, 3000, 64);  // 256-byte rows
  auto cpu = CpuStore::Create(*source, options);
  ASSERT_THAT(cpu.status(), IsOk());
  const std::vector<int64_t> ids = RandomIds(300, 3000, 11);
  auto want = Gather(**cpu, ids, DataType::kFloat32);
  ASSERT_THAT(want.status(), IsOk());
  const size_t row_bytes = 64 * sizeof(float);
  const size_t first_rows = 100;
  const size_t first_bytes = first_rows * row_bytes;
  const size_t second_bytes = (ids.size() - first_rows) * row_bytes;

  // Runs one batch of two callers whose spans are `first` and `second`; returns its host copy
  // time and checks the rows.
  // `first_device` and `second_device`: the spans as the device sees them, or nullptr.
  auto look_up = [&](GpuStore& store, std::byte* first, std::byte* second,
                     std::byte* first_device = nullptr, std::byte* second_device = nullptr) {
    std::memset(first, 0xa5, first_bytes);
    std::memset(second, 0xa5, second_bytes);
    const Answered answered =
        LookUpAndWait(store, ids, DataType::kFloat32,
                      {AnswerSpan{absl::MakeSpan(first, first_bytes), first_device},
                       AnswerSpan{absl::MakeSpan(second, second_bytes), second_device}});
    EXPECT_THAT(answered.status, IsOk());
    std::string got(reinterpret_cast<const char*>(first), first_bytes);
    got.append(reinterpret_cast<const char*>(second), second_bytes);
    EXPECT_TRUE(got == *want);
    return answered.times.host_copy;
  };

  for (size_t zero_copy_max_bytes : {size_t{0}, std::numeric_limits<size_t>::max()}) {
    SCOPED_TRACE(absl::StrCat("zero-copy up to ", zero_copy_max_bytes, " bytes"));
    options.zero_copy_max_bytes = zero_copy_max_bytes;
    auto gpu = GpuStore::Create(*source, 0, options);
    ASSERT_THAT(gpu.status(), IsOk());
    // One block holding both spans: the first one row in, the second ending at the block's last
    // byte.
    const size_t block_bytes = row_bytes + first_bytes + row_bytes + second_bytes;
    const HostBlock block = Pinned().Allocate(block_bytes);
    ASSERT_NE(block.host, nullptr);
    auto* host = static_cast<std::byte*>(block.host);
    auto* device = static_cast<std::byte*>(block.device);
    const size_t second_at = block_bytes - second_bytes;
    EXPECT_EQ(
        look_up(**gpu, host + row_bytes, host + second_at, device + row_bytes, device + second_at),
        0.0);
    Pinned().Release(block.host);

    std::vector<std::byte> ordinary(first_bytes + second_bytes);
    EXPECT_GT(look_up(**gpu, ordinary.data(), ordinary.data() + first_bytes), 0.0);
  }
}

// A batch's slot is free again before `done` runs: the batcher finishes calls there (gRPC sends
// a large answer for hundreds of microseconds), and the next batch must not wait for that.
TEST_F(GpuStoreTest, ASlotIsFreeWhileItsBatchIsAnswered) {
  StoreOptions options;
  options.max_batch_ids = 64;
  options.inflight_batches = 1;
  auto source = RandomTable(DataType::kFloat32, 500, 24);
  auto gpu = GpuStore::Create(*source, 0, options);
  ASSERT_THAT(gpu.status(), IsOk());
  auto cpu = CpuStore::Create(*source, options);
  ASSERT_THAT(cpu.status(), IsOk());
  const std::vector<int64_t> first_ids = {499, 0, 17, 17, 250};
  const std::vector<int64_t> second_ids = {3, 141, 59, 26};
  const size_t row_bytes = 24 * sizeof(float);
  OutBuffer first_out(first_ids.size() * row_bytes, nullptr);
  OutBuffer second_out(second_ids.size() * row_bytes, nullptr);
  absl::Status first_status;
  absl::Status second_status;
  bool second_answered_inside_first = false;
  absl::Notification first_done;
  const std::vector<AnswerSpan> first_outs = {first_out.span()};
  const std::vector<AnswerSpan> second_outs = {second_out.span()};
  // The first batch's `done` runs the second batch, through the store's only slot, and waits for
  // its answer.
  (*gpu)->LookUp(first_ids, DataType::kFloat32, first_outs,
                 [&](const absl::Status& s, const StageTimes&) {
                   first_status = s;
                   absl::Notification second_done;
                   (*gpu)->LookUp(second_ids, DataType::kFloat32, second_outs,
                                  [&](const absl::Status& s2, const StageTimes&) {
                                    second_status = s2;
                                    second_done.Notify();
                                  });
                   second_answered_inside_first =
                       second_done.WaitForNotificationWithTimeout(absl::Seconds(30));
                   first_done.Notify();
                 });
  first_done.WaitForNotification();
  ASSERT_TRUE(second_answered_inside_first);
  ASSERT_THAT(first_status, IsOk());
  ASSERT_THAT(second_status, IsOk());
  for (const auto& [ids, out] :
       {std::pair(&first_ids, &first_out), std::pair(&second_ids, &second_out)}) {
    auto want = Gather(**cpu, *ids, DataType::kFloat32);
    ASSERT_THAT(want.status(), IsOk());
    const AnswerSpan span = out->span();
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(span.host.data()), span.host.size()),
              *want);
  }
}

TEST_F(GpuStoreTest, SpansThatDoNotHoldTheRowsAreAnInternalError) {
  StoreOptions options;
  options.max_batch_ids = 64;
  options.inflight_batches = 1;
  auto source = RandomTable(DataType::kFloat32, 100, 8);
  auto gpu = GpuStore::Create(*source, 0, options);
  ASSERT_THAT(gpu.status(), IsOk());
  const std::vector<int64_t> ids = {1, 2, 3};
  EXPECT_THAT(Gather(**gpu, ids, DataType::kFloat32, {{2, false}}).status(),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("2 rows for 3 ids")));
}

// Every row of `source` through both stores, as `source`'s own type; "" when they agree.
std::string CompareAllRows(EmbeddingStore& gpu, EmbeddingStore& cpu, int64_t rows) {
  std::vector<int64_t> ids(static_cast<size_t>(rows));
  for (int64_t i = 0; i < rows; ++i) {
    ids[static_cast<size_t>(i)] = i;
  }
  auto got = Gather(gpu, ids, gpu.info().dtype);
  auto want = Gather(cpu, ids, cpu.info().dtype);
  if (!got.ok() || !want.ok()) {
    return absl::StrCat("gather failed: gpu ", got.status().ToString(), ", cpu ",
                        want.status().ToString());
  }
  if (*got != *want) {
    const auto diff = std::mismatch(got->begin(), got->end(), want->begin()).first;
    return absl::StrCat("first difference at byte ", diff - got->begin(), " of ", got->size());
  }
  return "";
}

// Updates of every rows type into tables of every type and row length (the scatter's 16-, 8-, 4-
// and 2-byte units), with ids given twice, applied to a GPU store and to the CPU store (the
// reference): every row of the table then agrees, byte for byte, and each update reports its
// distinct rows. Grows the staging memory (a larger update after a small one).
TEST_F(GpuStoreTest, UpdatedRowsMatchTheCpuStoreForEveryTypePairAndRowLength) {
  StoreOptions options;
  options.max_batch_ids = 4096;
  options.inflight_batches = 2;
  std::mt19937_64 rng(9);
  for (DataType table_type : {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16}) {
    for (int64_t dim : {1, 2, 3, 4, 8, 128, 300}) {
      const int64_t rows = 2000;
      auto source = RandomTable(table_type, rows, dim);
      auto gpu = GpuStore::Create(*source, 0, options);
      ASSERT_THAT(gpu.status(), IsOk());
      auto cpu = CpuStore::Create(*source, options);
      ASSERT_THAT(cpu.status(), IsOk());
      uint64_t seed = 1000;
      for (DataType rows_type : {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16}) {
        for (size_t n : {size_t{1}, size_t{37}, size_t{1500}}) {
          std::vector<int64_t> ids = RandomIds(n, rows, seed);
          if (n > 2) {
            ids[n - 1] = ids[0];  // given twice: the last row wins
          }
          const std::string data =
              emb::testing::RandomRows(rows_type, static_cast<int64_t>(n) * dim, seed++);
          const auto bytes =
              absl::MakeConstSpan(reinterpret_cast<const std::byte*>(data.data()), data.size());
          auto written = (*gpu)->UpdateRows(ids, rows_type, bytes);
          auto want = (*cpu)->UpdateRows(ids, rows_type, bytes);
          ASSERT_THAT(written.status(), IsOk());
          ASSERT_THAT(want.status(), IsOk());
          EXPECT_EQ(*written, *want);
          EXPECT_EQ(CompareAllRows(**gpu, **cpu, rows), "")
              << DataTypeName(rows_type) << " rows into " << DataTypeName(table_type) << " dim "
              << dim << ", " << n << " ids";
        }
      }
    }
  }
}

// Another version of the table loaded beside the served one, then swapped in: every row is the
// new version's; and with the device too full to hold both copies, PrepareTable is refused
// FAILED_PRECONDITION naming the bytes needed and free, and the served rows stay.
TEST_F(GpuStoreTest, AVersionSwapsInAndOneThatDoesNotFitBesideIsRefused) {
  const int64_t rows = 50000;
  const int64_t dim = 256;  // 51 MB of float32
  StoreOptions options;
  options.max_batch_ids = rows;  // CompareAllRows looks every row up in one batch
  options.inflight_batches = 2;
  auto served = RandomTable(DataType::kFloat32, rows, dim);
  auto gpu = GpuStore::Create(*served, 0, options);
  ASSERT_THAT(gpu.status(), IsOk());
  // The next version: other values, the same shape (RandomTable seeds by the shape, so write it
  // from other bytes).
  const std::string next_bytes = emb::testing::RandomRows(DataType::kFloat32, rows * dim, 99);
  const std::string next_path = dir_.File("next.npy");
  ASSERT_THAT(
      emb::testing::WriteFile(next_path, emb::testing::NpyFile("<f4", {rows, dim}, next_bytes)),
      IsOk());
  auto next = TableSource::Open(TableSpec{"t", next_path, "", {}});
  ASSERT_THAT(next.status(), IsOk());
  auto cpu_next = CpuStore::Create(**next, options);
  ASSERT_THAT(cpu_next.status(), IsOk());
  {
    // Fill the device until the version no longer fits beside the served table.
    size_t free_bytes = 0;
    size_t total_bytes = 0;
    ASSERT_EQ(cudaMemGetInfo(&free_bytes, &total_bytes), cudaSuccess);
    const size_t hog_bytes = free_bytes - (*next)->bytes() / 2;
    auto hog = kernels::DeviceBuffer<std::byte>::Allocate(hog_bytes);
    ASSERT_THAT(hog.status(), IsOk());
    auto refused = (*gpu)->PrepareTable(**next);
    EXPECT_THAT(refused.status(), StatusIs(absl::StatusCode::kFailedPrecondition,
                                           HasSubstr("beside the served table needs ")));
    EXPECT_THAT(refused.status().message(), HasSubstr(" are free; the served version stays"));
    auto cpu_served = CpuStore::Create(*served, options);
    ASSERT_THAT(cpu_served.status(), IsOk());
    EXPECT_EQ(CompareAllRows(**gpu, **cpu_served, rows), "");
  }
  auto prepared = (*gpu)->PrepareTable(**next);
  ASSERT_THAT(prepared.status(), IsOk());
  ASSERT_THAT((*gpu)->SwapTable(**prepared), IsOk());
  prepared->reset();  // the old rows go
  EXPECT_EQ(CompareAllRows(**gpu, **cpu_next, rows), "");
  // Another shape is refused whatever the room.
  auto narrow = RandomTable(DataType::kFloat32, rows, dim / 2);
  EXPECT_THAT((*gpu)->PrepareTable(*narrow).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("a version of another shape or type needs a restart")));
}

// Several readers and chunks that divide neither the rows nor the table: many chunks, a partial
// last one, chunk edges inside elements; the upload must land every byte where the CPU store has
// it.
TEST_F(GpuStoreTest, ParallelLoadWithUnevenChunksGivesTheCpuStoresRows) {
  StoreOptions options;
  options.max_batch_ids = 4096;
  options.inflight_batches = 1;
  struct Table {
    DataType type;
    int64_t rows, dim;
  };
  for (const Table& t : {Table{DataType::kFloat32, 1000, 300}, Table{DataType::kFloat16, 777, 3},
                         Table{DataType::kBFloat16, 2001, 5}}) {
    auto source = RandomTable(t.type, t.rows, t.dim);
    auto cpu = CpuStore::Create(*source, options);
    ASSERT_THAT(cpu.status(), IsOk());
    for (int readers : {1, 3, 8}) {
      for (size_t chunk : {size_t{4099}, size_t{65543}, size_t{0}}) {
        options.load_readers = readers;
        options.load_chunk_bytes = chunk;
        auto gpu = GpuStore::Create(*source, 0, options);
        ASSERT_THAT(gpu.status(), IsOk());
        const LoadPlan plan =
            PlanLoad(source->bytes(), readers, chunk, std::thread::hardware_concurrency());
        const LoadStats& stats = (*gpu)->load_stats();
        EXPECT_EQ(stats.bytes, source->bytes());
        EXPECT_EQ(stats.readers, plan.readers);
        EXPECT_EQ(stats.chunk_bytes, plan.chunk_bytes);
        EXPECT_GT(stats.seconds, 0);
        EXPECT_GT(stats.read_seconds, 0);
        if (source->bytes() > 1000000) {  // a few KB may copy within the events' resolution
          EXPECT_GT(stats.copy_seconds, 0);
        }
        EXPECT_LE(stats.read_seconds, stats.seconds);
        EXPECT_EQ(CompareAllRows(**gpu, **cpu, t.rows), "")
            << DataTypeName(t.type) << " " << t.rows << " x " << t.dim << ", " << readers
            << " readers, chunk " << chunk << " (" << plan.chunks << " chunks)";
      }
    }
  }
}

TEST_F(GpuStoreTest, ParallelLoadOfADemoTableGivesTheCpuStoresRows) {
  auto source = TableSource::Demo("demo", 3000, 17, 5);
  StoreOptions options;
  options.max_batch_ids = 4096;
  options.inflight_batches = 1;
  options.load_readers = 5;
  options.load_chunk_bytes = 1001;
  auto gpu = GpuStore::Create(*source, 0, options);
  ASSERT_THAT(gpu.status(), IsOk());
  auto cpu = CpuStore::Create(*source, options);
  ASSERT_THAT(cpu.status(), IsOk());
  EXPECT_EQ(CompareAllRows(**gpu, **cpu, 3000), "");
}

// The file loses its rows after Open: a reader's pread comes up short. Create returns the read
// error, with every reader ended (a reader left running would abort the test binary when its
// std::thread is destroyed) and nothing in flight on the staging buffers it freed.
TEST_F(GpuStoreTest, FileTruncatedAfterOpenFailsWithReadFailed) {
  const int64_t rows = 4000;
  const int64_t dim = 64;
  const std::string path = dir_.File("cut.npy");
  ASSERT_THAT(
      emb::testing::WriteFile(
          path, emb::testing::NpyFile("<f4", {rows, dim},
                                      emb::testing::RandomRows(DataType::kFloat32, rows * dim, 3))),
      IsOk());
  auto source = TableSource::Open(TableSpec{"t", path, "", {}});
  ASSERT_THAT(source.status(), IsOk());
  ASSERT_EQ(truncate(path.c_str(), static_cast<off_t>((*source)->bytes() / 2)), 0);
  StoreOptions options;
  options.max_batch_ids = 64;
  options.inflight_batches = 1;
  options.load_readers = 4;
  options.load_chunk_bytes = 10000;
  bool lost = false;
  options.on_device_lost = [&lost](const std::string&) { lost = true; };
  auto gpu = GpuStore::Create(**source, 0, options);
  EXPECT_THAT(gpu.status(), StatusIs(absl::StatusCode::kInternal, HasSubstr("read failed")));
  EXPECT_THAT(std::string(gpu.status().message()), HasSubstr(path));
  EXPECT_FALSE(lost);
  // The device is still fine: the next store loads.
  auto demo = TableSource::Demo("demo", 100, 8, 1);
  EXPECT_THAT(GpuStore::Create(*demo, 0, options).status(), IsOk());
}

TEST_F(GpuStoreTest, TableThatDoesNotFitNamesTableNeedAndFree) {
  // 2^37 float32 elements: 512 GiB, more than any GPU holds. Nothing is read before the check.
  auto source = TableSource::Demo("huge", int64_t{1} << 27, 1024, 1);
  StoreOptions options;
  options.host_tier = false;
  auto gpu = GpuStore::Create(*source, 0, options);
  EXPECT_THAT(gpu.status(), StatusIs(absl::StatusCode::kResourceExhausted,
                                     HasSubstr("table 'huge' does not fit on cuda:0")));
  EXPECT_THAT(std::string(gpu.status().message()), HasSubstr("bytes are free"));
  // In a host tier, it does not fit the host's memory either (the H200 host has 128 GiB): refused
  // before a page is touched.
  options.host_tier = true;
  EXPECT_THAT(GpuStore::Create(*source, 0, options).status(),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr("table 'huge' does not fit in host memory either")));
}

// ---- Tables in a host tier (host_tier.h) ----

// The GPU budget that puts `source` in a host tier with a cache of `cache_rows` rows.
size_t HostTierBudget(const TableSource& source, const StoreOptions& options, int64_t cache_rows) {
  return GpuStore::BatchBufferBytes(options, source.dim()) +
         HostTier::DeviceBytes(source.rows(), cache_rows, source.row_bytes());
}

// `n` ids skewed towards `hot_first` (row hot_first + floor(rows * u^4) mod rows, u uniform): a
// few rows take most lookups, as in recommendation traffic.
std::vector<int64_t> SkewedIds(size_t n, int64_t rows, int64_t hot_first, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::vector<int64_t> ids(n);
  for (int64_t& id : ids) {
    const double x = u(rng);
    id = (hot_first + static_cast<int64_t>(static_cast<double>(rows) * x * x * x * x)) % rows;
  }
  return ids;
}

std::vector<int64_t> FirstIds(int64_t n) {
  std::vector<int64_t> ids(static_cast<size_t>(n));
  std::iota(ids.begin(), ids.end(), 0);
  return ids;
}

TEST_F(GpuStoreTest, TableOverItsBudgetGoesToAHostTierWithTheCacheThatFits) {
  StoreOptions options;
  options.max_batch_ids = 1024;
  options.inflight_batches = 2;
  auto source = RandomTable(DataType::kFloat32, 1000, 16);
  options.gpu_budget_bytes = HostTierBudget(*source, options, 123);
  auto gpu = GpuStore::Create(*source, 0, options);
  ASSERT_THAT(gpu.status(), IsOk());
  EXPECT_TRUE((*gpu)->info().host_tier);
  EXPECT_EQ((*gpu)->info().cache_rows, 123);
  ASSERT_TRUE((*gpu)->cache_stats().has_value());
  EXPECT_EQ((*gpu)->cache_stats()->capacity_rows, 123);
  // A budget too small for the batch buffers and the cache's slots is refused, naming both.
  options.gpu_budget_bytes = 1000;
  EXPECT_THAT(GpuStore::Create(*source, 0, options).status(),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr("in host memory it would still need ")));
  // Without the host tier, the table over its budget is refused.
  options.gpu_budget_bytes = HostTierBudget(*source, options, 123);
  options.host_tier = false;
  EXPECT_THAT(GpuStore::Create(*source, 0, options).status(),
              StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("its GPU budget is ")));
  // A table within its budget stays on the device.
  options.gpu_budget_bytes = 0;
  auto plain = GpuStore::Create(*source, 0, options);
  ASSERT_THAT(plain.status(), IsOk());
  EXPECT_FALSE((*plain)->info().host_tier);
  EXPECT_FALSE((*plain)->cache_stats().has_value());
}

// Every table type (float ones, and int8 and int4 quantized at load) and answer type, rows of
// 3 to 300 elements, a cache of a tenth of the rows, half of it warmed with hot rows: every
// batch agrees with the CPU store byte for byte, from the first (hits from the warm rows, misses
// from host memory) to the last (the manager has moved rows in). Batches of 4,096 ids and of
// 20,000 (over the 16,384 ids the cache's manager counts of a batch).
TEST_F(GpuStoreTest, HostTierMatchesTheCpuStoreForEveryTypePair) {
  StoreOptions options;
  options.max_batch_ids = 20000;
  options.inflight_batches = 2;
  constexpr int64_t kRows = 3000;
  constexpr int64_t kCache = 300;
  options.hot_ids = FirstIds(kCache / 2);
  struct Table {
    DataType type;
    std::optional<DataType> quantize;
  };
  const Table tables[] = {{DataType::kFloat32, std::nullopt},
                          {DataType::kFloat16, std::nullopt},
                          {DataType::kBFloat16, std::nullopt},
                          {DataType::kFloat32, DataType::kInt8Rowwise},
                          {DataType::kFloat32, DataType::kInt4Rowwise}};
  for (const Table& t : tables) {
    for (int64_t dim : {3, 128, 300}) {
      auto source = RandomTable(t.type, kRows, dim, t.quantize);
      options.gpu_budget_bytes = HostTierBudget(*source, options, kCache);
      auto gpu = GpuStore::Create(*source, 0, options);
      ASSERT_THAT(gpu.status(), IsOk());
      ASSERT_TRUE((*gpu)->info().host_tier);
      auto cpu = CpuStore::Create(*source, options);
      ASSERT_THAT(cpu.status(), IsOk());
      constexpr int kBatches = 12;
      int64_t looked_up = 0;
      for (int b = 0; b < kBatches; ++b) {
        const std::vector<int64_t> ids = SkewedIds(b % 2 == 0 ? 4096 : 20000, kRows, 0, 100 + b);
        looked_up += static_cast<int64_t>(ids.size());
        const DataType out = static_cast<DataType>(1 + b % 3);
        auto got = Gather(**gpu, ids, out);
        auto want = Gather(**cpu, ids, out);
        ASSERT_THAT(got.status(), IsOk());
        ASSERT_THAT(want.status(), IsOk());
        ASSERT_TRUE(*got == *want) << DataTypeName((*gpu)->info().dtype) << " -> "
                                   << DataTypeName(out) << " dim " << dim << ", batch " << b;
      }
      const CacheStats stats = *(*gpu)->cache_stats();
      EXPECT_EQ(stats.lookups, looked_up);
      EXPECT_GT(stats.misses, 0);
      EXPECT_LT(stats.misses, stats.lookups) << "the warm rows were never hit";
      EXPECT_GE(stats.cached_rows, kCache / 2);
    }
  }
}

// A host tier without a cache (a budget with no room for one) reads every row from host memory,
// in batches small and large.
TEST_F(GpuStoreTest, HostTierWithoutACacheMatchesTheCpuStore) {
  StoreOptions options;
  options.max_batch_ids = 20000;
  options.inflight_batches = 2;
  auto source = RandomTable(DataType::kFloat32, 3000, 64);
  options.gpu_budget_bytes = HostTierBudget(*source, options, 0);
  auto gpu = GpuStore::Create(*source, 0, options);
  ASSERT_THAT(gpu.status(), IsOk());
  ASSERT_TRUE((*gpu)->info().host_tier);
  EXPECT_EQ((*gpu)->info().cache_rows, 0);
  auto cpu = CpuStore::Create(*source, options);
  ASSERT_THAT(cpu.status(), IsOk());
  for (const size_t n : {size_t{100}, size_t{20000}}) {
    const std::vector<int64_t> ids = SkewedIds(n, 3000, 0, n);
    auto got = Gather(**gpu, ids, DataType::kBFloat16);
    auto want = Gather(**cpu, ids, DataType::kBFloat16);
    ASSERT_THAT(got.status(), IsOk());
    ASSERT_THAT(want.status(), IsOk());
    EXPECT_TRUE(*got == *want) << n << " ids";
  }
}

// Pooled lookups (sum, weighted, mean, an empty bag) over a host tier agree with the CPU store.
TEST_F(GpuStoreTest, HostTierPoolsBagsAsTheCpuStoreDoes) {
  StoreOptions options;
  options.max_batch_ids = 4096;
  options.inflight_batches = 2;
  options.hot_ids = FirstIds(100);
  auto source = RandomTable(DataType::kFloat16, 2000, 64);
  options.gpu_budget_bytes = HostTierBudget(*source, options, 200);
  auto gpu = GpuStore::Create(*source, 0, options);
  ASSERT_THAT(gpu.status(), IsOk());
  auto cpu = CpuStore::Create(*source, options);
  ASSERT_THAT(cpu.status(), IsOk());
  const std::vector<int64_t> ids = SkewedIds(3000, 2000, 0, 5);
  // 10 plain ids, then bags of 0, 1, 7, and the rest split in bags of 40.
  std::vector<int64_t> offsets = {10, 10, 11, 18};
  while (offsets.back() + 40 < static_cast<int64_t>(ids.size())) {
    offsets.push_back(offsets.back() + 40);
  }
  offsets.push_back(static_cast<int64_t>(ids.size()));
  std::vector<float> weights(ids.size());
  std::mt19937_64 rng(3);
  for (float& w : weights) {
    w = static_cast<float>(rng() % 1000) / 250.0f - 2.0f;
  }
  auto pool = [&](EmbeddingStore& store, bool weighted) -> absl::StatusOr<std::string> {
    const size_t rows = 10 + offsets.size() - 1;
    const size_t row_bytes = 64 * ElementSize(DataType::kFloat32);
    OutBuffer plain(10 * row_bytes, nullptr);
    OutBuffer bags((rows - 10) * row_bytes, nullptr);
    const std::vector<AnswerSpan> outs = {plain.span(), bags.span()};
    LookUpBatch batch;
    batch.ids = ids;
    batch.outs = outs;
    batch.bags.offsets = offsets;
    if (weighted) {
      batch.bags.weights = weights;
    }
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
    std::string rows_out;
    for (const AnswerSpan& out : outs) {
      rows_out.append(reinterpret_cast<const char*>(out.host.data()), out.host.size());
    }
    return rows_out;
  };
  for (bool weighted : {false, true}) {
    auto got = pool(**gpu, weighted);
    auto want = pool(**cpu, weighted);
    ASSERT_THAT(got.status(), IsOk());
    ASSERT_THAT(want.status(), IsOk());
    EXPECT_TRUE(*got == *want) << (weighted ? "weighted" : "sum");
  }
}

// Six threads look up rows whose hot set moves (each thread's around its own rows) through a
// cache of 1% of the table, so the manager keeps evicting and admitting while batches run; rows
// of 256 bytes and of 48 (narrower than a cache line: neighbouring slots share lines). Every
// answer must be the CPU store's.
TEST_F(GpuStoreTest, HostTierAnswersStayRightWhileItsCacheChurns) {
  for (const auto& [type, dim] :
       {std::pair{DataType::kFloat32, int64_t{64}}, std::pair{DataType::kFloat16, int64_t{24}}}) {
    StoreOptions options;
    options.max_batch_ids = 2048;
    options.inflight_batches = 4;
    options.zero_copy_max_bytes = 64 << 10;  // both gather paths
    constexpr int64_t kRows = 20000;
    auto source = RandomTable(type, kRows, dim);
    options.gpu_budget_bytes = HostTierBudget(*source, options, kRows / 100);
    auto gpu = GpuStore::Create(*source, 0, options);
    ASSERT_THAT(gpu.status(), IsOk());
    auto cpu = CpuStore::Create(*source, options);
    ASSERT_THAT(cpu.status(), IsOk());
    constexpr int kThreads = 6;
    constexpr int kBatches = 60;
    std::atomic<int> wrong{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        std::mt19937_64 rng(t);
        for (int b = 0; b < kBatches; ++b) {
          const std::vector<int64_t> ids =
              SkewedIds(1 + rng() % 2048, kRows, (t * 3000 + b * 50) % kRows, rng());
          const DataType out = static_cast<DataType>(1 + rng() % 3);
          auto got = Gather(**gpu, ids, out);
          auto want = Gather(**cpu, ids, out);
          if (!got.ok() || !want.ok() || *got != *want) {
            ++wrong;
          }
        }
      });
    }
    for (auto& t : threads) {
      t.join();
    }
    EXPECT_EQ(wrong.load(), 0) << DataTypeName(type) << " dim " << dim;
    const CacheStats stats = *(*gpu)->cache_stats();
    EXPECT_GT(stats.cached_rows, 0);
    EXPECT_GT(stats.misses, 0);
    EXPECT_LT(stats.misses, stats.lookups);
  }
}

// Updates between rounds of lookups (which keep the manager moving rows), to rows cached and
// not: after each, every row of the table is the CPU store's, so no lookup reads an old row from
// the cache.
TEST_F(GpuStoreTest, HostTierUpdatesReachCachedAndUncachedRows) {
  StoreOptions options;
  options.max_batch_ids = 8192;
  options.inflight_batches = 2;
  constexpr int64_t kRows = 5000;
  constexpr int64_t kDim = 32;
  options.hot_ids = FirstIds(500);
  auto source = RandomTable(DataType::kFloat32, kRows, kDim);
  options.gpu_budget_bytes = HostTierBudget(*source, options, 500);
  auto gpu = GpuStore::Create(*source, 0, options);
  ASSERT_THAT(gpu.status(), IsOk());
  auto cpu = CpuStore::Create(*source, options);
  ASSERT_THAT(cpu.status(), IsOk());
  for (int round = 0; round < 4; ++round) {
    for (int b = 0; b < 5; ++b) {
      ASSERT_THAT(
          Gather(**gpu, SkewedIds(4096, kRows, round * 700, 50 * round + b), DataType::kFloat32)
              .status(),
          IsOk());
    }
    // Half the updated rows among the first 1000 (most of them cached), in float16.
    std::vector<int64_t> ids = RandomIds(300, 1000, 7 + round);
    const std::vector<int64_t> more = RandomIds(300, kRows, 70 + round);
    ids.insert(ids.end(), more.begin(), more.end());
    const std::string data = emb::testing::RandomRows(
        DataType::kFloat16, static_cast<int64_t>(ids.size()) * kDim, round + 1);
    const auto bytes =
        absl::MakeConstSpan(reinterpret_cast<const std::byte*>(data.data()), data.size());
    ASSERT_THAT((*gpu)->UpdateRows(ids, DataType::kFloat16, bytes).status(), IsOk());
    ASSERT_THAT((*cpu)->UpdateRows(ids, DataType::kFloat16, bytes).status(), IsOk());
    EXPECT_EQ(CompareAllRows(**gpu, **cpu, kRows), "") << "after update " << round;
  }
  EXPECT_GT((*gpu)->cache_stats()->cached_rows, 0);
}

// A version swapped into a host tier: every row is the new version's, hits or misses, and the
// table reads back (ReadRows) as the new version.
TEST_F(GpuStoreTest, HostTierVersionSwapServesTheNewRows) {
  StoreOptions options;
  options.max_batch_ids = 8192;
  options.inflight_batches = 2;
  constexpr int64_t kRows = 5000;
  constexpr int64_t kDim = 64;
  options.hot_ids = FirstIds(400);
  auto served = RandomTable(DataType::kFloat32, kRows, kDim);
  options.gpu_budget_bytes = HostTierBudget(*served, options, 400);
  auto gpu = GpuStore::Create(*served, 0, options);
  ASSERT_THAT(gpu.status(), IsOk());
  const std::string next_bytes = emb::testing::RandomRows(DataType::kFloat32, kRows * kDim, 77);
  const std::string next_path = dir_.File("next.npy");
  ASSERT_THAT(
      emb::testing::WriteFile(next_path, emb::testing::NpyFile("<f4", {kRows, kDim}, next_bytes)),
      IsOk());
  auto next = TableSource::Open(TableSpec{"t", next_path, "", {}});
  ASSERT_THAT(next.status(), IsOk());
  auto cpu_next = CpuStore::Create(**next, options);
  ASSERT_THAT(cpu_next.status(), IsOk());
  auto prepared = (*gpu)->PrepareTable(**next);
  ASSERT_THAT(prepared.status(), IsOk());
  ASSERT_THAT((*gpu)->SwapTable(**prepared), IsOk());
  prepared->reset();
  EXPECT_EQ(CompareAllRows(**gpu, **cpu_next, kRows), "");
  for (int b = 0; b < 5; ++b) {
    ASSERT_THAT(Gather(**gpu, SkewedIds(4096, kRows, 0, b), DataType::kFloat32).status(), IsOk());
  }
  EXPECT_EQ(CompareAllRows(**gpu, **cpu_next, kRows), "");
  std::string read_back(next_bytes.size(), '\0');
  ASSERT_THAT((*gpu)->ReadRows(0, absl::MakeSpan(reinterpret_cast<std::byte*>(read_back.data()),
                                                 read_back.size())),
              IsOk());
  EXPECT_TRUE(read_back == next_bytes);
}

}  // namespace
}  // namespace emb::service::gpu_store_test
