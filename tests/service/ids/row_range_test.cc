#include "service/ids/row_range.h"

#include <cstdint>
#include <random>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace emb::service {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

TEST(RowRange, WholeHoldsEveryIdAsItsOwnRow) {
  const RowRange whole = RowRange::Whole(5);
  EXPECT_TRUE(whole.Contains(0));
  EXPECT_TRUE(whole.Contains(4));
  EXPECT_FALSE(whole.Contains(5));
  EXPECT_FALSE(whole.Contains(-1));
  std::vector<int64_t> ids = {4, 0, 2};
  whole.ToLocal(absl::MakeSpan(ids));
  EXPECT_THAT(ids, ElementsAre(4, 0, 2));
  EXPECT_THAT(whole.ToLocalCopy(ids), IsEmpty());  // nothing to convert: use the ids
}

TEST(RowRange, AShardConvertsItsOwnIdsToRowsFromZero) {
  const RowRange shard(668, 333, 1001);
  EXPECT_EQ(shard.last(), 1000);
  EXPECT_FALSE(shard.Contains(667));
  EXPECT_TRUE(shard.Contains(668));
  EXPECT_TRUE(shard.Contains(1000));
  EXPECT_FALSE(shard.Contains(1001));
  std::vector<int64_t> ids = {1000, 668, 700};
  EXPECT_THAT(shard.ToLocalCopy(ids), ElementsAre(332, 0, 32));
  shard.ToLocal(absl::MakeSpan(ids));
  EXPECT_THAT(ids, ElementsAre(332, 0, 32));
  EXPECT_THAT(shard.LocalRowsOf({5, 668, 1001, 999, -3}), ElementsAre(0, 331));
}

// On random sizes: the blocks of a range hold each of its ids exactly once, in order, the split's
// Of names the block that holds an id, and only the last non-empty block may be shorter.
TEST(RowRange, BlocksHoldEveryIdOnceAndTheSplitFindsIt) {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 300; ++trial) {
    const int64_t whole = 1 + static_cast<int64_t>(rng() % 5000);
    const int64_t first = static_cast<int64_t>(rng() % static_cast<uint64_t>(whole));
    const int64_t count = 1 + static_cast<int64_t>(rng() % static_cast<uint64_t>(whole - first));
    const int n = 1 + static_cast<int>(rng() % 9);
    const RowRange range(first, count, whole);
    const RowRange::Blocks split = range.SplitInto(n);
    int64_t next = first;
    for (int k = 0; k < n; ++k) {
      const RowRange block = range.Block(k, n);
      EXPECT_EQ(block.whole(), whole);
      EXPECT_EQ(block.first(), block.count() > 0 ? next : block.first());
      EXPECT_LE(block.count(), range.BlockRows(n));
      if (block.count() < range.BlockRows(n) && k + 1 < n) {
        EXPECT_EQ(range.Block(k + 1, n).count(), 0) << "a short block before a full one";
      }
      for (int64_t id = block.first(); id <= block.last(); ++id) {
        ASSERT_EQ(split.Of(id), k) << "id " << id << " of " << first << "+" << count;
      }
      next += block.count();
    }
    EXPECT_EQ(next, first + count) << "the blocks of " << first << "+" << count << " over " << n;
  }
}

}  // namespace
}  // namespace emb::service
