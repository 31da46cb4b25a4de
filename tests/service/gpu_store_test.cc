// GpuStore against CpuStore on random tables: every table and answer dtype, odd dims, many
// batches in flight at once. Skips, saying why, where no GPU is visible.
#include "service/store/gpu_store.h"

#include <cuda_runtime_api.h>

#include <atomic>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/blocking_counter.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/cpu_gather.h"
#include "service/store/cpu_store.h"
#include "service/tables/table_source.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/table_files.h"

namespace emb::service {
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
  std::unique_ptr<TableSource> RandomTable(DataType type, int64_t rows, int64_t dim) {
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
    auto source = TableSource::Open(TableSpec{"t", path, ""});
    EXPECT_THAT(source.status(), IsOk());
    return std::move(*source);
  }

  emb::testing::TempDir dir_;
  int files_ = 0;
};

// Runs one LookUp and returns its rows (or the error).
absl::StatusOr<std::string> Gather(EmbeddingStore& store, const std::vector<int64_t>& ids,
                                   DataType out_type) {
  absl::StatusOr<std::string> result;
  absl::BlockingCounter done(1);
  store.LookUp(ids, out_type,
               [&](const absl::Status& s, absl::Span<const std::byte> rows, const StageTimes&) {
                 if (s.ok()) {
                   result = std::string(reinterpret_cast<const char*>(rows.data()), rows.size());
                 } else {
                   result = s;
                 }
                 done.DecrementCount();
               });
  done.Wait();
  return result;
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
        auto cpu = CpuStore::Create(*source, options.max_batch_ids);
        ASSERT_THAT(cpu.status(), IsOk());
        EXPECT_EQ((*gpu)->device(), "cuda:0");
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

TEST_F(GpuStoreTest, ManyBatchesInFlightEachGetTheirRows) {
  StoreOptions options;
  options.max_batch_ids = 2048;
  options.inflight_batches = 4;
  options.zero_copy_max_bytes = 256 << 10;  // answers of 4 bytes to 768 KB: both paths at once
  auto source = RandomTable(DataType::kFloat32, 5000, 96);
  auto gpu = GpuStore::Create(*source, 0, options);
  ASSERT_THAT(gpu.status(), IsOk());
  auto cpu = CpuStore::Create(*source, options.max_batch_ids);
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
  EXPECT_EQ(wrong.load(), 0);
}

TEST_F(GpuStoreTest, TableThatDoesNotFitNamesTableNeedAndFree) {
  // 2^37 float32 elements: 512 GiB, more than any GPU holds. Nothing is read before the check.
  auto source = TableSource::Demo("huge", int64_t{1} << 27, 1024, 1);
  StoreOptions options;
  auto gpu = GpuStore::Create(*source, 0, options);
  EXPECT_THAT(gpu.status(), StatusIs(absl::StatusCode::kResourceExhausted,
                                     HasSubstr("table 'huge' does not fit on cuda:0")));
  EXPECT_THAT(std::string(gpu.status().message()), HasSubstr("bytes are free"));
}

}  // namespace
}  // namespace emb::service
