// What the kernel tests that need a GPU share: skipping, with the reason, where no CUDA device can
// be used, ASSERT_OK for the kernels' absl::Status results, and a gather through LaunchLookup.
#ifndef EMB_TESTS_KERNELS_GPU_TEST_UTIL_H_
#define EMB_TESTS_KERNELS_GPU_TEST_UTIL_H_

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "kernels/data_type.h"
#include "kernels/lookup.h"

namespace emb::testing {

// Why GPU tests can't run here, or "" when they can.
inline std::string NoGpuReason() {
  absl::StatusOr<int> n = kernels::DeviceCount();
  if (!n.ok()) {
    return absl::StrCat("no usable CUDA device: ", n.status().ToString());
  }
  if (*n == 0) {
    return "no CUDA device: cudaGetDeviceCount() == 0";
  }
  return "";
}

// LaunchLookup of `num_ids` ids, one an answer row, from a table in device memory.
inline absl::Status GatherRows(const kernels::GatherTuning& tuning, const void* d_table,
                               DataType table_type, int64_t num_rows, int64_t dim,
                               const int64_t* d_ids, int64_t num_ids, void* d_out,
                               DataType out_type, cudaStream_t stream) {
  kernels::LookupProblem p;
  p.table = d_table;
  p.table_type = table_type;
  p.rows = num_rows;
  p.dim = dim;
  p.ids = d_ids;
  p.num_bags = num_ids;
  p.out = d_out;
  p.out_type = out_type;
  return kernels::LaunchLookup(tuning, p, stream);
}

}  // namespace emb::testing

#define EMB_SKIP_WITHOUT_GPU()                                                 \
  do {                                                                         \
    if (const std::string why = ::emb::testing::NoGpuReason(); !why.empty()) { \
      GTEST_SKIP() << why;                                                     \
    }                                                                          \
  } while (false)

#define ASSERT_OK(expr)                                       \
  do {                                                        \
    const absl::Status assert_ok_status_ = (expr);            \
    ASSERT_TRUE(assert_ok_status_.ok()) << assert_ok_status_; \
  } while (false)

#endif  // EMB_TESTS_KERNELS_GPU_TEST_UTIL_H_
