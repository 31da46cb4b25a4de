#include "service/batch/answer_buffer.h"

#include <memory>
#include <utility>

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
  AnswerBufferPool* pool;  // nullptr: freed after use
  int size_class;
  size_t capacity;
  std::unique_ptr<std::byte[]> bytes;  // uninitialised
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

std::byte* AnswerBuffer::data() const { return block_ != nullptr ? block_->bytes.get() : nullptr; }

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

AnswerBufferPool::AnswerBufferPool(size_t max_bytes) : max_bytes_(max_bytes) {}

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
  const size_t bytes = pooled ? capacity : size;
  auto* block = new AnswerBuffer::Block{pooled ? this : nullptr, c, bytes,
                                        std::unique_ptr<std::byte[]>(new std::byte[bytes])};
  return AnswerBuffer(block, size);
}

void AnswerBufferPool::Return(AnswerBuffer::Block* block) {
  absl::MutexLock lock(&mu_);
  idle_[block->size_class].push_back(block);
  stats_.idle_bytes += block->capacity;
}

AnswerBufferPool::Stats AnswerBufferPool::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

}  // namespace emb::service
