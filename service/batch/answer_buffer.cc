#include "service/batch/answer_buffer.h"

#include <utility>
#include <vector>

namespace emb::service {
namespace {

// The size class of `size` (> 0): the smallest c with kMinBlockBytes << c >= size.
int SizeClass(size_t size) {
  if (size <= AnswerBufferPool::kMinBlockBytes) {
    return 0;
  }
  const int bits = 64 - __builtin_clzll(static_cast<unsigned long long>(size - 1));
  return bits - __builtin_ctzll(AnswerBufferPool::kMinBlockBytes);
}

}  // namespace

struct AnswerBuffer::Block {
  // `capacity` uninitialised bytes from `allocator`, or from new[] when it is nullptr.
  Block(AnswerBufferPool* pool, int size_class, size_t capacity, const HostAllocator* allocator)
      : pool(pool), size_class(size_class), capacity(capacity) {
    void* p = allocator != nullptr ? allocator->Allocate(capacity) : nullptr;
    if (p != nullptr) {
      bytes = static_cast<std::byte*>(p);
      this->allocator = allocator;
    } else {
      bytes = new std::byte[capacity];
    }
  }
  ~Block() {
    if (allocator != nullptr) {
      allocator->Release(bytes);
    } else {
      delete[] bytes;
    }
  }
  Block(const Block&) = delete;
  Block& operator=(const Block&) = delete;

  AnswerBufferPool* const pool;  // nullptr: freed after use
  const int size_class;
  const size_t capacity;
  std::byte* bytes = nullptr;
  const HostAllocator* allocator = nullptr;  // where `bytes` came from; nullptr: new[]
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

AnswerBufferPool::AnswerBufferPool(size_t max_bytes, const HostAllocator* allocator)
    : allocator_(allocator), max_bytes_(max_bytes) {}

AnswerBufferPool::~AnswerBufferPool() {
  absl::MutexLock lock(&mu_);
  for (auto& list : idle_) {
    for (AnswerBuffer::Block* block : list) {
      delete block;
    }
    list.clear();
  }
}

AnswerBufferPool& AnswerBufferPool::Default() {
  static auto* pool = new AnswerBufferPool();  // never destroyed: gRPC may recycle at any time
  return *pool;
}

AnswerBufferPool& AnswerBufferPool::For(const HostAllocator* allocator) {
  if (allocator == nullptr) {
    return Default();
  }
  static absl::Mutex mu;
  // Never destroyed, nor are their pools: gRPC may recycle at any time.
  static auto* pools = new std::vector<std::pair<const HostAllocator*, AnswerBufferPool*>>;
  absl::MutexLock lock(&mu);
  for (const auto& [a, pool] : *pools) {
    if (a == allocator) {
      return *pool;
    }
  }
  pools->emplace_back(allocator, new AnswerBufferPool(kDefaultMaxBytes, allocator));
  return *pools->back().second;
}

AnswerBuffer AnswerBufferPool::Acquire(size_t size) {
  if (size == 0) {
    return AnswerBuffer();
  }
  const int c = SizeClass(size);
  const size_t capacity = c < kClasses ? kMinBlockBytes << c : size;
  std::vector<AnswerBuffer::Block*> evicted;  // freed outside the lock
  bool pooled = false;
  {
    absl::MutexLock lock(&mu_);
    if (c < kClasses && !idle_[c].empty()) {
      AnswerBuffer::Block* block = idle_[c].back();
      idle_[c].pop_back();
      stats_.idle_bytes -= capacity;
      ++stats_.reused;
      return AnswerBuffer(block, size);
    }
    if (c < kClasses && capacity <= max_bytes_) {
      // Make room by freeing idle blocks of other classes, the largest first.
      for (int k = kClasses - 1; k >= 0 && stats_.owned_bytes + capacity > max_bytes_; --k) {
        while (!idle_[k].empty() && stats_.owned_bytes + capacity > max_bytes_) {
          evicted.push_back(idle_[k].back());
          idle_[k].pop_back();
          const size_t freed = kMinBlockBytes << k;
          stats_.owned_bytes -= freed;
          stats_.idle_bytes -= freed;
          ++stats_.evicted;
        }
      }
      pooled = stats_.owned_bytes + capacity <= max_bytes_;
    }
    if (pooled) {
      stats_.owned_bytes += capacity;
      ++stats_.allocated;
    } else {
      ++stats_.unpooled;
    }
  }
  for (AnswerBuffer::Block* block : evicted) {
    delete block;
  }
  auto* block = pooled ? new AnswerBuffer::Block(this, c, capacity, allocator_)
                       : new AnswerBuffer::Block(nullptr, c, size, nullptr);
  if (pooled && allocator_ != nullptr && block->allocator == nullptr) {
    absl::MutexLock lock(&mu_);
    ++stats_.fallbacks;
  }
  return AnswerBuffer(block, size);
}

void AnswerBufferPool::Return(AnswerBuffer::Block* block) {
  absl::MutexLock lock(&mu_);
  idle_[block->size_class].push_back(block);
  stats_.idle_bytes += block->capacity;
}

size_t AnswerBufferPool::max_bytes() const {
  absl::MutexLock lock(&mu_);
  return max_bytes_;
}

void AnswerBufferPool::SetMaxBytes(size_t max_bytes) {
  absl::MutexLock lock(&mu_);
  max_bytes_ = max_bytes;
}

AnswerBufferPool::Stats AnswerBufferPool::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

}  // namespace emb::service
