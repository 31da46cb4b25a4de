// A lost GPU context (a sticky CUDA error) reaches the store's on_device_lost hook, which in the
// server sets health NOT_SERVING, logs and exits 1. Runs in its own binary: the context stays
// broken for the rest of the process. Skips, saying why, where no GPU is visible.
#include <cuda_runtime_api.h>

#include <string>
#include <vector>

#include "absl/synchronization/blocking_counter.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/cuda_status.h"
#include "service/store/gpu/gpu_store.h"
#include "service/tables/table_source.h"
#include "tests/testing/cuda_fault.h"
#include "tests/testing/status_matchers.h"

namespace emb::service::gpu_device_loss_test {
namespace {

using ::emb::testing::IsOk;
using ::testing::HasSubstr;

TEST(GpuDeviceLoss, StickyErrorCallsOnDeviceLostAndFailsTheBatch) {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    GTEST_SKIP() << "no CUDA device visible (cudaGetDeviceCount: " << cudaGetErrorName(e) << ")";
  }
  auto source = TableSource::Demo("demo", 1000, 16, 1);
  std::vector<std::string> lost;
  StoreOptions options;
  options.max_batch_ids = 64;
  options.inflight_batches = 1;
  // In the server this hook never returns (it exits); here it records, so the test can look.
  options.on_device_lost = [&lost](const std::string& why) { lost.push_back(why); };
  auto store = GpuStore::Create(*source, 0, options);
  ASSERT_THAT(store.status(), IsOk());

  const cudaError_t broken = emb::testing::BreakCudaContext();
  ASSERT_TRUE(kernels::IsStickyCudaError(broken)) << cudaGetErrorName(broken);

  absl::Status status;
  absl::BlockingCounter done(1);
  const std::vector<int64_t> ids = {1, 2, 3};
  std::vector<std::byte> answer(ids.size() * 16 * sizeof(float));
  const AnswerSpan outs[] = {AnswerSpan{absl::MakeSpan(answer)}};
  (*store)->LookUp(ids, DataType::kFloat32, outs, [&](const absl::Status& s, const StageTimes&) {
    status = s;
    done.DecrementCount();
  });
  done.Wait();
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr(cudaGetErrorName(broken)));
  ASSERT_FALSE(lost.empty()) << "on_device_lost was not called";
  EXPECT_THAT(lost.front(), HasSubstr("cuda:0"));
  store->release();  // skip the destructor: its CUDA frees would only report the dead context
}

}  // namespace
}  // namespace emb::service::gpu_device_loss_test
