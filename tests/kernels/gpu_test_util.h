// What the kernel tests that need a GPU share: skipping, with the reason, where no CUDA device can
// be used, and ASSERT_OK for the kernels' absl::Status results.
#ifndef EMB_TESTS_KERNELS_GPU_TEST_UTIL_H_
#define EMB_TESTS_KERNELS_GPU_TEST_UTIL_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "kernels/embedding_lookup.h"

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
