#include "service/batch/answer_buffer.h"

#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace emb::service {
namespace {

constexpr int kClasses = 40;  // 4 KiB << 39 is far beyond any answer

// The size class of `size` (> 0): the smallest c with kMinBlockBytes << c >= size.
int SizeClass(size_t size) {
  if (size <= AnswerBufferPool::kMinBlockBytes) {
    return 0;
  }
  const int bits = 64 - __builtin_clzll(static_cast<unsigned long long>(size - 1));
  return bits - __builtin_ctzll(AnswerBufferPool::kMinBlockBytes);
}

}  // namespace

struct AnswerBufferPool::Shared {
  Shared(size_t max_bytes, std::shared_ptr<const HostAllocator> allocator)
      : allocator(std::move(allocator)), max_bytes(max_bytes) {}

  // Puts a block of this pool on its class's free list, or frees it once the pool is gone.
  void Return(AnswerBuffer::Block* block);

  const std::shared_ptr<const HostAllocator> allocator;
  absl::Mutex mu;
  bool closed ABSL_GUARDED_BY(mu) = false;  // the pool was destroyed
  size_t max_bytes ABSL_GUARDED_BY(mu);
  std::vector<AnswerBuffer::Block*> idle[kClasses] ABSL_GUARDED_BY(mu);
  Stats stats ABSL_GUARDED_BY(mu);
};

struct AnswerBuffer::Block {
  // `capacity` uninitialised bytes from the pool's allocator, or from new[] when it has none (or
  // for an unpooled block, `pool` nullptr).
  Block(std::shared_ptr<AnswerBufferPool::Shared> pool_in, int size_class, size_t capacity)
      : pool(std::move(pool_in)), size_class(size_class), capacity(capacity) {
    if (pool != nullptr && pool->allocator != nullptr) {
      const HostBlock b = pool->allocator->Allocate(capacity);
      bytes = static_cast<std::byte*>(b.host);
      device_bytes = static_cast<std::byte*>(b.device);
    }
    if (bytes == nullptr) {
      bytes = new std::byte[capacity];
      device_bytes = nullptr;
    } else {
      from_allocator = true;
    }
  }
  ~Block() {
    if (from_allocator) {
      pool->allocator->Release(bytes);
    } else {
      delete[] bytes;
    }
  }
  Block(const Block&) = delete;
  Block& operator=(const Block&) = delete;

  const std::shared_ptr<AnswerBufferPool::Shared> pool;  // nullptr: freed after use
  const int size_class;
  const size_t capacity;
  std::byte* bytes = nullptr;
  std::byte* device_bytes = nullptr;  // `bytes` as the allocator's device sees them, or nullptr
  bool from_allocator = false;        // else from new[]
};

AnswerBuffer::AnswerBuffer(AnswerBuffer&& other) noexcept
    : block_(std::exchange(other.block_, nullptr)), size_(std::exchange(other.size_, 0)) {}

AnswerBuffer& AnswerBuffer::operator=(AnswerBuffer&& other) noexcept {
  if (this != &other) {
    Recycle(ReleaseHandle());
    block_ = std::exchange(other.block_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

AnswerBuffer::~AnswerBuffer() { Recycle(ReleaseHandle()); }

std::byte* AnswerBuffer::data() const { return block_ != nullptr ? block_->bytes : nullptr; }

std::byte* AnswerBuffer::device_data() const {
  return block_ != nullptr ? block_->device_bytes : nullptr;
}

bool AnswerBuffer::pooled() const { return block_ != nullptr && block_->pool != nullptr; }

void* AnswerBuffer::ReleaseHandle() {
  size_ = 0;
  return std::exchange(block_, nullptr);
}

void AnswerBuffer::Recycle(void* handle) {
  auto* block = static_cast<Block*>(handle);
  if (block == nullptr) {
    return;
  }
  if (block->pool != nullptr) {
    block->pool->Return(block);
  } else {
    delete block;
  }
}

void AnswerBufferPool::Shared::Return(AnswerBuffer::Block* block) {
  {
    absl::MutexLock lock(&mu);
    if (!closed) {
      idle[block->size_class].push_back(block);
      stats.idle_bytes += block->capacity;
      return;
    }
  }
  delete block;  // may drop the last reference to this state: nothing of it is used after
}

AnswerBufferPool::AnswerBufferPool(size_t max_bytes, std::shared_ptr<const HostAllocator> allocator)
    : shared_(std::make_shared<Shared>(max_bytes, std::move(allocator))) {}

AnswerBufferPool::~AnswerBufferPool() {
  std::vector<AnswerBuffer::Block*> idle;
  {
    absl::MutexLock lock(&shared_->mu);
    shared_->closed = true;
    for (auto& list : shared_->idle) {
      idle.insert(idle.end(), list.begin(), list.end());
      list.clear();
    }
  }
  for (AnswerBuffer::Block* block : idle) {
    delete block;
  }
}

size_t AnswerBufferPool::BlockBytes(size_t size) {
  if (size == 0) {
    return 0;
  }
  const int c = SizeClass(size);
  return c < kClasses ? kMinBlockBytes << c : size;
}

AnswerBuffer AnswerBufferPool::Acquire(size_t size) {
  if (size == 0) {
    return AnswerBuffer();
  }
  Shared& s = *shared_;
  const int c = SizeClass(size);
  const size_t capacity = c < kClasses ? kMinBlockBytes << c : size;
  std::vector<AnswerBuffer::Block*> evicted;  // freed outside the lock
  bool pooled = false;
  {
    absl::MutexLock lock(&s.mu);
    if (c < kClasses && !s.idle[c].empty()) {
      AnswerBuffer::Block* block = s.idle[c].back();
      s.idle[c].pop_back();
      s.stats.idle_bytes -= capacity;
      ++s.stats.reused;
      return AnswerBuffer(block, size);
    }
    if (c < kClasses && capacity <= s.max_bytes) {
      // Make room by freeing idle blocks of other classes, the largest first.
      for (int k = kClasses - 1; k >= 0 && s.stats.owned_bytes + capacity > s.max_bytes; --k) {
        while (!s.idle[k].empty() && s.stats.owned_bytes + capacity > s.max_bytes) {
          evicted.push_back(s.idle[k].back());
          s.idle[k].pop_back();
          const size_t freed = kMinBlockBytes << k;
          s.stats.owned_bytes -= freed;
          s.stats.idle_bytes -= freed;
          ++s.stats.evicted;
        }
      }
      pooled = s.stats.owned_bytes + capacity <= s.max_bytes;
    }
    if (pooled) {
      s.stats.owned_bytes += capacity;
      ++s.stats.allocated;
    } else {
      ++s.stats.unpooled;
    }
  }
  for (AnswerBuffer::Block* block : evicted) {
    delete block;
  }
  auto* block = pooled ? new AnswerBuffer::Block(shared_, c, capacity)
                       : new AnswerBuffer::Block(nullptr, c, size);
  if (pooled && s.allocator != nullptr && !block->from_allocator) {
    absl::MutexLock lock(&s.mu);
    ++s.stats.fallbacks;
  }
  return AnswerBuffer(block, size);
}

size_t AnswerBufferPool::max_bytes() const {
  absl::MutexLock lock(&shared_->mu);
  return shared_->max_bytes;
}

void AnswerBufferPool::SetMaxBytes(size_t max_bytes) {
  absl::MutexLock lock(&shared_->mu);
  shared_->max_bytes = max_bytes;
}

AnswerBufferPool::Stats AnswerBufferPool::stats() const {
  absl::MutexLock lock(&shared_->mu);
  return shared_->stats;
}

}  // namespace emb::service
