// Table rows in host memory.
#ifndef EMB_SERVICE_TABLES_HOST_ROWS_H_
#define EMB_SERVICE_TABLES_HOST_ROWS_H_

#include <cstddef>
#include <memory>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace emb::service {

// A read-only view of a table's rows in host memory, kept alive by its owner.
class HostRows {
 public:
  virtual ~HostRows() = default;
  virtual const std::byte* data() const = 0;
};

// Rows in anonymous memory, 2 MiB aligned and backed by huge pages where the kernel allows: a
// gather touches rows at random, and with 4 KiB pages nearly every row costs a TLB miss (a two-
// level page walk under a hypervisor).
class HugePageRows final : public HostRows {
 public:
  // `bytes` of rows, uninitialised. RESOURCE_EXHAUSTED (naming `what`) when the memory cannot
  // be had.
  static absl::StatusOr<std::unique_ptr<HugePageRows>> Allocate(size_t bytes,
                                                                absl::string_view what);
  ~HugePageRows() override;
  const std::byte* data() const override { return data_; }
  std::byte* mutable_data() { return data_; }

 private:
  HugePageRows(void* base, size_t length) : base_(base), length_(length) {}
  void* base_;
  size_t length_;
  std::byte* data_ = nullptr;
};

}  // namespace emb::service

#endif  // EMB_SERVICE_TABLES_HOST_ROWS_H_
