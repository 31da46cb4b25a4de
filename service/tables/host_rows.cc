#include "service/tables/host_rows.h"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace emb::service {

absl::StatusOr<std::unique_ptr<HugePageRows>> HugePageRows::Allocate(size_t bytes,
                                                                     absl::string_view what) {
  constexpr size_t kHugePage = size_t{2} << 20;
  const size_t length = std::max(kHugePage, (bytes + kHugePage - 1) / kHugePage * kHugePage);
  // Over-allocate by one huge page so that the start can be aligned to one.
  void* base =
      mmap(nullptr, length + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (base == MAP_FAILED) {
    return absl::ResourceExhaustedError(absl::StrCat(what, ": cannot allocate ", bytes,
                                                     " bytes of host memory: ", strerror(errno)));
  }
  auto rows = std::unique_ptr<HugePageRows>(new HugePageRows(base, length + kHugePage));
  const uintptr_t aligned =
      (reinterpret_cast<uintptr_t>(base) + kHugePage - 1) / kHugePage * kHugePage;
  rows->data_ = reinterpret_cast<std::byte*>(aligned);
  (void)madvise(rows->data_, length, MADV_HUGEPAGE);  // a hint: without THP, 4 KiB pages
  return rows;
}

HugePageRows::~HugePageRows() { munmap(base_, length_); }

}  // namespace emb::service
