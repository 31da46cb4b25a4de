// The host-side pieces of GpuStore's parallel table upload: the plan, the chunk cursor, the busy
// time of overlapping reads, the summary line, and ReadTable (a host tier's load). No GPU needed.
#include "service/store/load_plan.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "service/common/clock.h"
#include "service/tables/table_source.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/table_files.h"

namespace emb::service::load_plan_test {
namespace {

constexpr size_t kMiB = size_t{1} << 20;
constexpr size_t kGiB = size_t{1} << 30;

TEST(PlanLoad, DefaultsToEightReadersOfSixteenMiBChunks) {
  const LoadPlan plan = PlanLoad(4 * kGiB, 0, 0, 16);
  EXPECT_EQ(plan.readers, 8);
  EXPECT_EQ(plan.chunk_bytes, 16 * kMiB);
  EXPECT_EQ(plan.chunks, 256u);
  EXPECT_EQ(plan.staging_bytes(), 256 * kMiB);
}

TEST(PlanLoad, DefaultReadersFollowTheHardwareThreads) {
  EXPECT_EQ(PlanLoad(4 * kGiB, 0, 0, 2).readers, 2);
  EXPECT_EQ(PlanLoad(4 * kGiB, 0, 0, 1).readers, 1);
  EXPECT_EQ(PlanLoad(4 * kGiB, 0, 0, 0).readers, 1);  // unknown
  EXPECT_EQ(PlanLoad(4 * kGiB, 0, 0, 128).readers, 8);
}

TEST(PlanLoad, ExplicitReadersAreKept) {
  EXPECT_EQ(PlanLoad(4 * kGiB, 1, 0, 16).readers, 1);
  EXPECT_EQ(PlanLoad(4 * kGiB, 12, 0, 16).readers, 12);
}

TEST(PlanLoad, LastChunkIsPartialAndTheChunksCoverTheTable) {
  const size_t table = 1000 * 300 * 4 + 2;  // an odd size
  const LoadPlan plan = PlanLoad(table, 3, 4099, 16);
  EXPECT_EQ(plan.chunk_bytes, 4099u);
  EXPECT_EQ(plan.chunks, (table + 4098) / 4099);
  size_t covered = 0;
  for (size_t i = 0; i < plan.chunks; ++i) {
    EXPECT_EQ(plan.ChunkOffset(i), covered);
    covered += plan.ChunkSize(i);
  }
  EXPECT_EQ(covered, table);
  EXPECT_EQ(plan.ChunkSize(plan.chunks - 1), table % 4099);
  EXPECT_EQ(plan.ChunkSize(plan.chunks), 0u);
}

TEST(PlanLoad, SmallTableIsOneChunkAndOneReader) {
  const LoadPlan plan = PlanLoad(1000, 8, 0, 16);
  EXPECT_EQ(plan.chunk_bytes, 1000u);
  EXPECT_EQ(plan.chunks, 1u);
  EXPECT_EQ(plan.readers, 1);
}

TEST(PlanLoad, ReadersAreCutToTheChunks) { EXPECT_EQ(PlanLoad(3 * 4099, 8, 4099, 16).readers, 3); }

TEST(PlanLoad, StagingStaysWithinOneGiBForAnyTableAndSettings) {
  for (size_t table : {kGiB, 100 * kGiB, 1000 * kGiB}) {
    for (int readers : {0, 1, 8, 64, 1000}) {
      for (size_t chunk : {size_t{0}, 64 * kMiB, 256 * kMiB, 4 * kGiB}) {
        const LoadPlan plan = PlanLoad(table, readers, chunk, 16);
        EXPECT_LE(plan.staging_bytes(), kMaxLoadStagingBytes)
            << table << " bytes, " << readers << " readers, chunk " << chunk;
        EXPECT_GE(plan.readers, 1);
      }
    }
  }
  EXPECT_EQ(PlanLoad(100 * kGiB, 64, 64 * kMiB, 16).readers, 8);  // 8 x 2 x 64 MiB = 1 GiB
  EXPECT_EQ(PlanLoad(100 * kGiB, 1, 4 * kGiB, 16).chunk_bytes, 512 * kMiB);
}

TEST(PlanLoad, EmptyTableHasNothingToRead) {
  const LoadPlan plan = PlanLoad(0, 0, 0, 16);
  EXPECT_EQ(plan.chunks, 0u);
  EXPECT_EQ(plan.readers, 0);
  EXPECT_EQ(plan.staging_bytes(), 0u);
}

TEST(ChunkCursor, HandsOutEachChunkOnceInOrder) {
  ChunkCursor cursor(3);
  EXPECT_EQ(cursor.Next(), std::optional<size_t>(0));
  EXPECT_EQ(cursor.Next(), std::optional<size_t>(1));
  EXPECT_EQ(cursor.Next(), std::optional<size_t>(2));
  EXPECT_EQ(cursor.Next(), std::nullopt);
  EXPECT_EQ(cursor.Next(), std::nullopt);
}

TEST(ChunkCursor, NoChunks) {
  ChunkCursor cursor(0);
  EXPECT_EQ(cursor.Next(), std::nullopt);
}

TEST(ChunkCursor, StopEndsTheHandOut) {
  ChunkCursor cursor(10);
  EXPECT_EQ(cursor.Next(), std::optional<size_t>(0));
  cursor.Stop();
  EXPECT_EQ(cursor.Next(), std::nullopt);
}

TEST(ChunkCursor, ThreadsTogetherGetEveryChunkExactlyOnceEachInIncreasingOrder) {
  constexpr size_t kChunks = 100000;
  ChunkCursor cursor(kChunks);
  std::vector<std::atomic<int>> taken(kChunks);
  std::atomic<int> out_of_order{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([&] {
      std::optional<size_t> last;
      while (std::optional<size_t> i = cursor.Next()) {
        taken[*i].fetch_add(1);
        if (last.has_value() && *i <= *last) {
          out_of_order.fetch_add(1);
        }
        last = i;
      }
    });
  }
  for (std::thread& t : threads) {
    t.join();
  }
  EXPECT_EQ(out_of_order.load(), 0);
  for (size_t i = 0; i < kChunks; ++i) {
    ASSERT_EQ(taken[i].load(), 1) << "chunk " << i;
  }
}

TEST(BusySeconds, UnionOfOverlappingAndDisjointIntervals) {
  EXPECT_DOUBLE_EQ(BusySeconds({}), 0);
  EXPECT_DOUBLE_EQ(BusySeconds({{1, 3}}), 2);
  EXPECT_DOUBLE_EQ(BusySeconds({{1, 3}, {2, 5}}), 4);           // overlapping
  EXPECT_DOUBLE_EQ(BusySeconds({{2, 5}, {1, 3}, {7, 8}}), 5);   // unsorted, with a gap
  EXPECT_DOUBLE_EQ(BusySeconds({{1, 10}, {2, 3}, {4, 5}}), 9);  // nested
  EXPECT_DOUBLE_EQ(BusySeconds({{1, 2}, {2, 3}}), 2);           // touching
  EXPECT_DOUBLE_EQ(BusySeconds({{3, 1}, {4, 4}}), 0);           // reversed, empty
}

TEST(LoadStats, RatesAndSummary) {
  LoadStats stats;
  stats.bytes = 4000000000;
  stats.readers = 8;
  stats.chunk_bytes = 16 * kMiB;
  stats.seconds = 0.4;
  stats.read_seconds = 0.32;
  stats.copy_seconds = 0.16;
  EXPECT_DOUBLE_EQ(stats.rate(), 1e10);
  EXPECT_DOUBLE_EQ(stats.read_rate(), 1.25e10);
  EXPECT_DOUBLE_EQ(stats.copy_rate(), 2.5e10);
  EXPECT_EQ(LoadSummary("t", stats),
            "table 't' upload: 4000000000 bytes in 0.400 s (10.00 GB/s): reads 12.50 GB/s over 8 "
            "threads, copies 25.00 GB/s, staging 16 x 16 MiB");
}

TEST(LoadStats, ZeroTimesGiveZeroRates) {
  LoadStats stats;
  stats.bytes = 10;
  EXPECT_EQ(stats.rate(), 0);
  EXPECT_EQ(stats.read_rate(), 0);
  EXPECT_EQ(stats.copy_rate(), 0);
}

// ReadTable with readers and chunks that divide neither the rows nor the table (a partial last
// chunk, chunk edges inside elements) puts every byte of the file where it belongs.
TEST(ReadTable, ReadersLandEveryByteInPlace) {
  emb::testing::TempDir dir;
  const std::string data = emb::testing::RandomRows(DataType::kFloat16, 1001 * 7, /*seed=*/3);
  const std::string path = dir.File("t.npy");
  ASSERT_THAT(emb::testing::WriteFile(path, emb::testing::NpyFile("<f2", {1001, 7}, data)),
              emb::testing::IsOk());
  auto source = TableSource::Open(TableSpec{"t", path, "", {}});
  ASSERT_THAT(source.status(), emb::testing::IsOk());
  for (const auto& [readers, chunk] : {std::pair{1, size_t{4096}}, std::pair{3, size_t{999}},
                                       std::pair{8, size_t{1}} /* one byte a chunk */}) {
    const LoadPlan plan = PlanLoad((*source)->bytes(), readers, chunk, 16);
    std::string out((*source)->bytes(), '\0');
    auto stats = ReadTable(**source, plan, reinterpret_cast<std::byte*>(out.data()), Clock::Real());
    ASSERT_THAT(stats.status(), emb::testing::IsOk());
    EXPECT_TRUE(out == data) << readers << " readers, chunks of " << chunk;
    EXPECT_EQ(stats->bytes, data.size());
    EXPECT_EQ(stats->readers, plan.readers);
  }
}

// A file cut after it was opened: ReadTable fails naming the file, with every reader ended.
TEST(ReadTable, AReadFailureIsReturned) {
  emb::testing::TempDir dir;
  const std::string data = emb::testing::RandomRows(DataType::kFloat32, 4000 * 16, /*seed=*/4);
  const std::string path = dir.File("t.npy");
  ASSERT_THAT(emb::testing::WriteFile(path, emb::testing::NpyFile("<f4", {4000, 16}, data)),
              emb::testing::IsOk());
  auto source = TableSource::Open(TableSpec{"t", path, "", {}});
  ASSERT_THAT(source.status(), emb::testing::IsOk());
  ASSERT_EQ(truncate(path.c_str(), 1000), 0);
  const LoadPlan plan = PlanLoad((*source)->bytes(), 4, 4096, 16);
  std::string out((*source)->bytes(), '\0');
  auto stats = ReadTable(**source, plan, reinterpret_cast<std::byte*>(out.data()), Clock::Real());
  EXPECT_FALSE(stats.ok());
  EXPECT_THAT(std::string(stats.status().message()), ::testing::HasSubstr("t.npy"));
}

}  // namespace
}  // namespace emb::service::load_plan_test
