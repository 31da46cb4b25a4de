// Tests InFlightBatches (service/store/cache/in_flight_batches.h): WaitForEarlier returns only
// after every batch begun before it has ended, whatever order they end in. No sleeps: a waiter
// that returned too early would see the flags of the batches still unset.
#include "service/store/cache/in_flight_batches.h"

#include <atomic>
#include <thread>

#include "gtest/gtest.h"

namespace emb::service::in_flight_batches_test {
namespace {

TEST(InFlightBatchesTest, NothingOpenReturnsAtOnce) {
  InFlightBatches batches;
  batches.WaitForEarlier();
  batches.End(batches.Begin());
  batches.WaitForEarlier();
  EXPECT_EQ(batches.open(), 0u);
}

TEST(InFlightBatchesTest, WaitsForEveryEarlierBatchWhateverTheOrderTheyEnd) {
  for (int round = 0; round < 200; ++round) {
    InFlightBatches batches;
    const uint64_t a = batches.Begin();
    const uint64_t b = batches.Begin();
    const uint64_t c = batches.Begin();
    std::atomic<bool> a_ended{false};
    std::atomic<bool> c_ended{false};
    std::atomic<bool> saw_both{false};
    std::thread waiter([&] {
      batches.WaitForEarlier();
      saw_both = a_ended.load() && c_ended.load();
    });
    // b ends first, then c, then a: the waiter returns only after a.
    batches.End(b);
    c_ended = true;
    batches.End(c);
    a_ended = true;
    batches.End(a);
    waiter.join();
    EXPECT_TRUE(saw_both) << "round " << round;
  }
}

// Batches that ended before the wait do not hold it; one still open does, until it ends.
TEST(InFlightBatchesTest, OnlyBatchesStillOpenHoldTheWait) {
  InFlightBatches batches;
  batches.End(batches.Begin());
  const uint64_t open = batches.Begin();
  std::atomic<bool> ended{false};
  std::thread ender([&] {
    ended = true;
    batches.End(open);
  });
  batches.WaitForEarlier();
  EXPECT_TRUE(ended.load());
  ender.join();
  EXPECT_EQ(batches.open(), 0u);
}

}  // namespace
}  // namespace emb::service::in_flight_batches_test
