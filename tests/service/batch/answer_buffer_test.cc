#include "service/batch/answer_buffer.h"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <random>
#include <thread>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"

namespace emb::service::answer_buffer_test {
namespace {

constexpr size_t kKiB = 1024;

TEST(AnswerBufferPool, ZeroBytesIsAnEmptyBufferFromNoBlock) {
  AnswerBufferPool pool;
  AnswerBuffer b = pool.Acquire(0);
  EXPECT_TRUE(b.empty());
  EXPECT_EQ(b.data(), nullptr);
  EXPECT_EQ(b.ReleaseHandle(), nullptr);
  EXPECT_EQ(pool.stats().owned_bytes, 0u);
}

TEST(AnswerBufferPool, ABufferHasTheSizeAskedForAndIsWritable) {
  AnswerBufferPool pool;
  for (size_t size : {size_t{1}, size_t{4095}, size_t{4096}, size_t{4097}, size_t{6} << 20}) {
    AnswerBuffer b = pool.Acquire(size);
    ASSERT_EQ(b.size(), size);
    ASSERT_NE(b.data(), nullptr);
    std::memset(b.data(), 0x5a, size);  // all of it is ours (ASan checks the bounds)
    EXPECT_TRUE(b.pooled());
  }
}

TEST(AnswerBufferPool, ReusesAReturnedBlockOfTheSameSizeClass) {
  AnswerBufferPool pool;
  std::byte* first;
  {
    AnswerBuffer b = pool.Acquire(5000);  // the 8 KiB class
    first = b.data();
  }
  EXPECT_EQ(pool.stats().idle_bytes, 8 * kKiB);
  AnswerBuffer again = pool.Acquire(8 * kKiB);
  EXPECT_EQ(again.data(), first);
  EXPECT_EQ(again.size(), 8 * kKiB);
  const AnswerBufferPool::Stats s = pool.stats();
  EXPECT_EQ(s.allocated, 1);
  EXPECT_EQ(s.reused, 1);
  EXPECT_EQ(s.idle_bytes, 0u);
  EXPECT_EQ(s.owned_bytes, 8 * kKiB);
}

TEST(AnswerBufferPool, SmallSizesShareTheSmallestClass) {
  AnswerBufferPool pool;
  { AnswerBuffer b = pool.Acquire(3); }
  AnswerBuffer b = pool.Acquire(AnswerBufferPool::kMinBlockBytes);
  EXPECT_EQ(pool.stats().reused, 1);
  EXPECT_EQ(pool.stats().owned_bytes, AnswerBufferPool::kMinBlockBytes);
}

TEST(AnswerBufferPool, OtherSizeClassesGetTheirOwnBlocks) {
  AnswerBufferPool pool;
  { AnswerBuffer b = pool.Acquire(5000); }      // 8 KiB
  AnswerBuffer big = pool.Acquire(9 * kKiB);    // 16 KiB
  AnswerBuffer small = pool.Acquire(3 * kKiB);  // 4 KiB
  const AnswerBufferPool::Stats s = pool.stats();
  EXPECT_EQ(s.reused, 0);
  EXPECT_EQ(s.allocated, 3);
  EXPECT_EQ(s.owned_bytes, 28 * kKiB);
  EXPECT_EQ(s.idle_bytes, 8 * kKiB);
}

TEST(AnswerBufferPool, PastTheBoundABlockIsFreshAndFreedAfterUse) {
  AnswerBufferPool pool(/*max_bytes=*/64 * kKiB);
  AnswerBuffer a = pool.Acquire(32 * kKiB);
  AnswerBuffer b = pool.Acquire(32 * kKiB);
  AnswerBuffer c = pool.Acquire(32 * kKiB);  // the pool owns 64 KiB already, all in use
  EXPECT_TRUE(a.pooled());
  EXPECT_TRUE(b.pooled());
  EXPECT_FALSE(c.pooled());
  std::memset(c.data(), 1, c.size());
  EXPECT_EQ(pool.stats().unpooled, 1);
  c = AnswerBuffer();  // freed, not kept
  a = AnswerBuffer();
  b = AnswerBuffer();
  const AnswerBufferPool::Stats s = pool.stats();
  EXPECT_EQ(s.owned_bytes, 64 * kKiB);
  EXPECT_EQ(s.idle_bytes, 64 * kKiB);
}

TEST(AnswerBufferPool, ABlockLargerThanTheBoundIsNeverPooled) {
  AnswerBufferPool pool(/*max_bytes=*/64 * kKiB);
  { AnswerBuffer b = pool.Acquire(65 * kKiB); }
  AnswerBuffer b = pool.Acquire(65 * kKiB);
  EXPECT_FALSE(b.pooled());
  const AnswerBufferPool::Stats s = pool.stats();
  EXPECT_EQ(s.unpooled, 2);
  EXPECT_EQ(s.owned_bytes, 0u);
}

TEST(AnswerBufferPool, FreesIdleBlocksOfAnotherClassToMakeRoom) {
  AnswerBufferPool pool(/*max_bytes=*/64 * kKiB);
  { AnswerBuffer b = pool.Acquire(64 * kKiB); }  // idle, and the pool is full
  AnswerBuffer b = pool.Acquire(32 * kKiB);
  EXPECT_TRUE(b.pooled());
  const AnswerBufferPool::Stats s = pool.stats();
  EXPECT_EQ(s.evicted, 1);
  EXPECT_EQ(s.owned_bytes, 32 * kKiB);
  EXPECT_EQ(s.idle_bytes, 0u);
}

TEST(AnswerBuffer, AReleasedHandleReturnsToThePoolWhenRecycled) {
  AnswerBufferPool pool;
  AnswerBuffer b = pool.Acquire(100 * kKiB);
  std::byte* data = b.data();
  void* handle = b.ReleaseHandle();
  EXPECT_TRUE(b.empty());
  EXPECT_EQ(b.data(), nullptr);
  EXPECT_EQ(pool.stats().idle_bytes, 0u);  // still out: the handle's owner has it
  std::thread([handle] { AnswerBuffer::Recycle(handle); }).join();  // on another thread
  EXPECT_EQ(pool.stats().idle_bytes, 128 * kKiB);
  EXPECT_EQ(pool.Acquire(128 * kKiB).data(), data);
  AnswerBuffer::Recycle(nullptr);  // harmless
}

TEST(AnswerBuffer, MovingTransfersTheBlockAndAssigningReturnsTheOldOne) {
  AnswerBufferPool pool;
  AnswerBuffer a = pool.Acquire(5000);
  std::byte* data = a.data();
  AnswerBuffer b(std::move(a));
  EXPECT_TRUE(a.empty());  // NOLINT(bugprone-use-after-move): moved-from is empty by contract
  EXPECT_EQ(b.data(), data);
  EXPECT_EQ(b.size(), 5000u);
  b = pool.Acquire(20000);  // the 8 KiB block goes back
  EXPECT_EQ(pool.stats().idle_bytes, 8 * kKiB);
}

TEST(AnswerBufferPool, TheDefaultBoundIsKDefaultMaxBytes) {
  AnswerBufferPool pool;
  EXPECT_EQ(pool.max_bytes(), AnswerBufferPool::kDefaultMaxBytes);
}

// A HostAllocator over new[] that counts its blocks, or that has none to give. Its blocks' device
// address is the host address plus kDeviceOffset, so a test can tell where one came from.
class CountingAllocator final : public HostAllocator {
 public:
  static constexpr uintptr_t kDeviceOffset = 1 << 20;

  HostBlock Allocate(size_t bytes) const override {
    if (refuse.load()) {
      return HostBlock{};
    }
    live.fetch_add(1);
    auto* host = new std::byte[bytes];
    return HostBlock{host,
                     reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(host) + kDeviceOffset)};
  }
  void Release(void* host) const override {
    live.fetch_sub(1);
    delete[] static_cast<std::byte*>(host);
  }

  static inline std::atomic<int> live{0};
  static inline std::atomic<bool> refuse{false};
};

std::shared_ptr<const HostAllocator> Counting() { return std::make_shared<CountingAllocator>(); }

TEST(AnswerBufferPool, PooledBlocksComeFromItsAllocatorAndGoBackToIt) {
  {
    AnswerBufferPool pool(/*max_bytes=*/64 * kKiB, Counting());
    AnswerBuffer a = pool.Acquire(10 * kKiB);
    std::memset(a.data(), 0x5a, a.size());
    EXPECT_EQ(CountingAllocator::live.load(), 1);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(a.device_data()),
              reinterpret_cast<uintptr_t>(a.data()) + CountingAllocator::kDeviceOffset);
    AnswerBuffer past_bound = pool.Acquire(100 * kKiB);  // never pooled: from new[]
    std::memset(past_bound.data(), 0x5a, past_bound.size());
    EXPECT_FALSE(past_bound.pooled());
    EXPECT_EQ(past_bound.device_data(), nullptr);  // no device sees new[] memory
    EXPECT_EQ(CountingAllocator::live.load(), 1);
    a = AnswerBuffer();  // back to the pool, still the allocator's
    EXPECT_EQ(CountingAllocator::live.load(), 1);
    EXPECT_EQ(pool.stats().fallbacks, 0);
  }
  EXPECT_EQ(CountingAllocator::live.load(), 0);  // the pool released its idle block
}

TEST(AnswerBufferPool, WhenItsAllocatorHasNoneAPooledBlockComesFromNew) {
  AnswerBufferPool pool(/*max_bytes=*/64 * kKiB, Counting());
  CountingAllocator::refuse = true;
  AnswerBuffer a = pool.Acquire(10 * kKiB);
  CountingAllocator::refuse = false;
  std::memset(a.data(), 0x5a, a.size());
  EXPECT_TRUE(a.pooled());
  EXPECT_EQ(a.device_data(), nullptr);
  EXPECT_EQ(CountingAllocator::live.load(), 0);
  EXPECT_EQ(pool.stats().fallbacks, 1);
}

// gRPC may hand an answer back after the server, and so its pool, is gone: the block is then
// freed, with the allocator it came from (ASan and LSan check the rest).
TEST(AnswerBufferPool, ABufferReturnedAfterItsPoolIsGoneIsFreedWithItsAllocator) {
  void* handle = nullptr;
  {
    AnswerBufferPool pool(/*max_bytes=*/64 * kKiB, Counting());
    AnswerBuffer idle = pool.Acquire(10 * kKiB);
    AnswerBuffer held = pool.Acquire(20 * kKiB);
    std::memset(held.data(), 0x5a, held.size());
    handle = held.ReleaseHandle();
    EXPECT_EQ(CountingAllocator::live.load(), 2);
  }  // `idle` went back to the pool first, which freed it with itself
  EXPECT_EQ(CountingAllocator::live.load(), 1);
  AnswerBuffer::Recycle(handle);
  EXPECT_EQ(CountingAllocator::live.load(), 0);
}

// Many threads acquire buffers of mixed sizes, each writes a pattern of its own into its buffer
// and hands it to another thread, which checks the pattern is intact and then returns the buffer
// (half through the destructor, half through ReleaseHandle + Recycle). A block handed to a second
// owner while the first still had it would be overwritten and caught. The bound is small, so
// the run also takes the fallback and eviction paths.
TEST(AnswerBufferPool, ConcurrentAcquireAndReleaseOnOtherThreadsNeverShareABlock) {
  constexpr int kProducers = 6;
  constexpr int kConsumers = 3;
  constexpr int kBuffersEach = 400;
  AnswerBufferPool pool(/*max_bytes=*/1 << 20);

  struct Item {
    AnswerBuffer buffer;
    uint32_t tag = 0;
  };
  absl::Mutex mu;
  std::deque<Item> queue;           // guarded by mu
  int producers_left = kProducers;  // guarded by mu
  std::vector<std::thread> threads;
  for (int p = 0; p < kProducers; ++p) {
    threads.emplace_back([&, p] {
      std::mt19937 rng(p);
      for (int i = 0; i < kBuffersEach; ++i) {
        const size_t size = size_t{1} << (rng() % 18 + 1);  // 2 B to 256 KiB
        AnswerBuffer b = pool.Acquire(size - rng() % (size / 2 + 1));
        const uint32_t tag = static_cast<uint32_t>(p * kBuffersEach + i) * 2654435761u;
        for (size_t k = 0; k + sizeof(tag) <= b.size(); k += sizeof(tag)) {
          std::memcpy(b.data() + k, &tag, sizeof(tag));
        }
        absl::MutexLock lock(&mu);
        queue.push_back(Item{std::move(b), tag});
      }
      absl::MutexLock lock(&mu);
      --producers_left;
    });
  }
  std::vector<int> bad(kConsumers, 0);
  for (int c = 0; c < kConsumers; ++c) {
    threads.emplace_back([&, c] {
      for (int n = 0;; ++n) {
        Item item;
        {
          absl::MutexLock lock(&mu);
          auto ready = [&] { return !queue.empty() || producers_left == 0; };
          mu.Await(absl::Condition(&ready));
          if (queue.empty()) {
            return;
          }
          item = std::move(queue.front());
          queue.pop_front();
        }
        for (size_t k = 0; k + sizeof(item.tag) <= item.buffer.size(); k += sizeof(item.tag)) {
          uint32_t got;
          std::memcpy(&got, item.buffer.data() + k, sizeof(got));
          if (got != item.tag) {
            ++bad[c];
            break;
          }
        }
        if (n % 2 == 0) {
          AnswerBuffer::Recycle(item.buffer.ReleaseHandle());
        }  // else the destructor returns it
      }
    });
  }
  for (std::thread& t : threads) {
    t.join();
  }
  for (int c = 0; c < kConsumers; ++c) {
    EXPECT_EQ(bad[c], 0) << "consumer " << c << " saw a buffer overwritten by another owner";
  }
  const AnswerBufferPool::Stats s = pool.stats();
  EXPECT_EQ(s.reused + s.allocated + s.unpooled, kProducers * kBuffersEach);
  EXPECT_GT(s.reused, 0);
  EXPECT_LE(s.owned_bytes, pool.max_bytes());
  EXPECT_EQ(s.idle_bytes, s.owned_bytes);  // every buffer came back
}

}  // namespace
}  // namespace emb::service::answer_buffer_test
