#include "service/store/gpu/batch_slots.h"

#include <cuda_runtime_api.h>

#include <utility>

#include "service/common/status_macros.h"

namespace emb::service {

size_t SlotBagsBytes(int64_t max_batch_ids) {
  const auto n = static_cast<size_t>(max_batch_ids);
  return (n + 1) * sizeof(int64_t) + 2 * n * sizeof(float) + 512;  // + two 256-byte alignments
}

absl::StatusOr<std::unique_ptr<SlotPool>> SlotPool::Create(int count, int64_t max_batch_ids,
                                                           size_t max_out_bytes,
                                                           const CudaCheck& check) {
  auto pool = std::unique_ptr<SlotPool>(new SlotPool());
  // Mapped, so that a small batch's kernel reads its ids and writes its rows here directly.
  constexpr unsigned kMapped = cudaHostAllocMapped | cudaHostAllocPortable;
  for (int i = 0; i < count; ++i) {
    auto slot = std::make_unique<BatchSlot>();
    ASSIGN_OR_RETURN(slot->stream, kernels::CudaStream::Create());
    for (kernels::CudaEvent* e :
         {&slot->start, &slot->copied_in, &slot->gathered, &slot->copied_out}) {
      ASSIGN_OR_RETURN(*e, kernels::CudaEvent::Create(/*timing=*/true));
    }
    ASSIGN_OR_RETURN(slot->h_ids, kernels::PinnedBuffer<int64_t>::Allocate(max_batch_ids, kMapped));
    ASSIGN_OR_RETURN(slot->d_ids, kernels::DeviceBuffer<int64_t>::Allocate(max_batch_ids));
    ASSIGN_OR_RETURN(slot->d_out, kernels::DeviceBuffer<std::byte>::Allocate(max_out_bytes));
    ASSIGN_OR_RETURN(slot->h_bags,
                     kernels::PinnedBuffer<std::byte>::Allocate(SlotBagsBytes(max_batch_ids)));
    ASSIGN_OR_RETURN(slot->d_bags,
                     kernels::DeviceBuffer<std::byte>::Allocate(SlotBagsBytes(max_batch_ids)));
    ASSIGN_OR_RETURN(slot->h_out,
                     kernels::PinnedBuffer<std::byte>::Allocate(max_out_bytes, kMapped));
    RETURN_IF_ERROR(check(cudaHostGetDevicePointer(reinterpret_cast<void**>(&slot->mapped_ids),
                                                   slot->h_ids.data(), 0),
                          "cudaHostGetDevicePointer"));
    RETURN_IF_ERROR(check(cudaHostGetDevicePointer(reinterpret_cast<void**>(&slot->mapped_out),
                                                   slot->h_out.data(), 0),
                          "cudaHostGetDevicePointer"));
    pool->slots_.push_back(std::move(slot));
  }
  absl::MutexLock lock(&pool->mu_);
  for (auto& slot : pool->slots_) {
    pool->free_.push_back(slot.get());
  }
  return pool;
}

BatchSlot* SlotPool::Acquire() {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](std::vector<BatchSlot*>* free) { return !free->empty(); }, &free_));
  BatchSlot* slot = free_.back();
  free_.pop_back();
  return slot;
}

void SlotPool::Release(BatchSlot* slot) {
  absl::MutexLock lock(&mu_);
  free_.push_back(slot);
}

}  // namespace emb::service
