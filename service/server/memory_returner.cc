#include "service/server/memory_returner.h"

#include <malloc.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>

#include "service/common/log.h"

namespace emb::service {
namespace {

// The process's resident set in bytes (/proc/self/statm), 0 if unreadable.
uint64_t ResidentBytes() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) {
    return 0;
  }
  unsigned long long pages_total = 0;     // NOLINT(google-runtime-int): fscanf's type
  unsigned long long pages_resident = 0;  // NOLINT(google-runtime-int): fscanf's type
  const int read = std::fscanf(f, "%llu %llu", &pages_total, &pages_resident);
  std::fclose(f);
  return read == 2 ? pages_resident * static_cast<uint64_t>(sysconf(_SC_PAGESIZE)) : 0;
}

}  // namespace

MemoryReturner::MemoryReturner(absl::Duration period, uint64_t threshold_bytes)
    : thread_([this, period, threshold_bytes] { Run(period, threshold_bytes); }) {}

MemoryReturner::~MemoryReturner() {
  stop_.Notify();
  thread_.join();
}

void MemoryReturner::Run(absl::Duration period, uint64_t threshold_bytes) {
  // Resident memory the allocator does not hand out ("idle": the code, the stacks, mappings, and
  // the free chunks not yet given back). A trim leaves the pages it returns counted free by the
  // allocator, so fordblks alone would trim every period: the next trim waits until the idle
  // part has grown again by the threshold. Measured against what is in use, not the resident set
  // alone, so that memory freed after a trim made while it was still in use is returned too.
  uint64_t idle_after_trim = 0;
  while (!stop_.WaitForNotificationWithTimeout(period)) {
    const struct mallinfo2 info = mallinfo2();  // every arena's chunks
    const uint64_t in_use = info.uordblks + info.hblkhd;
    const uint64_t before = ResidentBytes();
    const uint64_t idle = before > in_use ? before - in_use : 0;
    if (info.fordblks < threshold_bytes || idle < idle_after_trim + threshold_bytes) {
      continue;
    }
    malloc_trim(0);
    const uint64_t after = ResidentBytes();
    idle_after_trim = after > in_use ? after - in_use : 0;
    if (before > after) {
      returned_bytes_.fetch_add(before - after, std::memory_order_relaxed);
      LogInfo("returned ", (before - after) >> 20, " MiB of freed memory to the system (",
              info.fordblks >> 20, " MiB were free in the allocator; resident ", before >> 20,
              " -> ", after >> 20, " MiB)");
    }
  }
}
}  // namespace emb::service
