// AnswerBuffer: the memory one caller's answer rows are written into and that gRPC then sends
// from. Its bytes are uninitialised (nothing zero-fills them); whoever fills it writes every byte.
//
// AnswerBufferPool keeps the blocks of finished answers, one free list per power-of-two size
// class, and hands them out again, so that a large answer (6 MiB for 2048 x 768 float32) is
// neither zero-filled nor page-faulted in on every call. The pool owns at most max_bytes of blocks
// (handed out and idle together); past that, and for a size whose class has no idle block, a
// block is allocated fresh, and one beyond the bound is freed again when its answer is done.
// A pool made with a HostAllocator takes its pooled blocks from it (the GPU backend's pinned,
// mapped memory, which the device writes rows into directly; such a buffer knows its device
// address), falling back to new[] when it has none; blocks beyond the bound always come from
// new[], as pinning memory for one use costs more than it saves. The server makes one pool for
// all its tables (portable pinned memory, which every GPU of the process writes into, where any
// table is on a GPU) and hands it to every batcher.
//
// A buffer goes back to its pool when it is destroyed, or, once handed over with ReleaseHandle(),
// when Recycle() is called on the handle (gRPC does that from a slice's destroy callback, on any
// thread, whenever it has sent the bytes, which may be after the server and its pools are gone).
// So a pool's blocks share its state: a block that comes back after its pool was destroyed is
// freed then, with the allocator it came from.
// AnswerBufferPool is thread-safe; an AnswerBuffer is a move-only owner (thread-compatible).
#ifndef EMB_SERVICE_BATCH_ANSWER_BUFFER_H_
#define EMB_SERVICE_BATCH_ANSWER_BUFFER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "service/common/host_allocator.h"

namespace emb::service {

class AnswerBufferPool;

class AnswerBuffer {
 public:
  AnswerBuffer() = default;  // empty: size() 0, data() nullptr
  AnswerBuffer(AnswerBuffer&& other) noexcept;
  AnswerBuffer& operator=(AnswerBuffer&& other) noexcept;
  AnswerBuffer(const AnswerBuffer&) = delete;
  AnswerBuffer& operator=(const AnswerBuffer&) = delete;
  // Returns the block to its pool, or frees it.
  ~AnswerBuffer();

  std::byte* data() const;
  // data() as the device of the pool's allocator sees it; nullptr where no device does.
  std::byte* device_data() const;
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  // Whether the block returns to a pool when done with (false: freed then).
  bool pooled() const;

  // Hands the block over to a C-style owner: returns a handle that must be passed to Recycle()
  // exactly once, after the last use of data(); nullptr for an empty buffer. Leaves this empty.
  void* ReleaseHandle();
  // Returns a handle's block to its pool, or frees it. Any thread. Fits a gRPC slice's
  // `void (*destroy)(void*)`.
  static void Recycle(void* handle);

 private:
  friend class AnswerBufferPool;
  struct Block;
  AnswerBuffer(Block* block, size_t size) : block_(block), size_(size) {}

  Block* block_ = nullptr;
  size_t size_ = 0;
};

class AnswerBufferPool {
 public:
  // The default bound: 1 GiB of blocks, e.g. 128 answers of 2048 x 768 float32 in flight.
  static constexpr size_t kDefaultMaxBytes = size_t{1} << 30;
  // The smallest size class; smaller answers get a block of this size.
  static constexpr size_t kMinBlockBytes = size_t{4} << 10;

  // A pool that owns at most `max_bytes` of blocks, taken from `allocator` (nullptr: new[]).
  explicit AnswerBufferPool(size_t max_bytes = kDefaultMaxBytes,
                            std::shared_ptr<const HostAllocator> allocator = nullptr);
  // Frees the idle blocks; the blocks still handed out are freed when they come back.
  ~AnswerBufferPool();
  AnswerBufferPool(const AnswerBufferPool&) = delete;
  AnswerBufferPool& operator=(const AnswerBufferPool&) = delete;

  // The bytes a buffer of `size` bytes occupies at most: its size class's block (0 for 0).
  static size_t BlockBytes(size_t size);

  // A buffer of `size` uninitialised bytes: an idle block of its size class if there is one, else
  // a fresh block (pooled while the pool's bound allows, after freeing idle blocks of other
  // classes if that makes room; otherwise of exactly `size` bytes, freed after use). An empty
  // buffer for 0. Allocation failure throws std::bad_alloc, as `new` does.
  AnswerBuffer Acquire(size_t size);

  struct Stats {
    size_t owned_bytes = 0;  // pooled blocks, handed out or idle
    size_t idle_bytes = 0;   // pooled blocks waiting to be handed out
    int64_t reused = 0;      // Acquire()s served from an idle block
    int64_t allocated = 0;   // fresh pooled blocks
    int64_t unpooled = 0;    // fresh blocks past the bound, freed after use
    int64_t evicted = 0;     // idle blocks freed to make room for another size class
    int64_t fallbacks = 0;   // pooled blocks from new[] because the allocator had none
  };
  Stats stats() const;
  size_t max_bytes() const;
  // Changes the bound for the blocks allocated from now on; idle blocks beyond it are freed as
  // later Acquire()s need room.
  void SetMaxBytes(size_t max_bytes);

 private:
  friend class AnswerBuffer;
  struct Shared;  // the free lists and counters, shared with the pool's blocks

  std::shared_ptr<Shared> shared_;
};

}  // namespace emb::service

#endif  // EMB_SERVICE_BATCH_ANSWER_BUFFER_H_
