#include "kernels/pooled_lookup.h"

#include "absl/strings/str_cat.h"
#include "kernels/bags/bag_launch.h"
#include "kernels/cuda_status.h"

namespace emb::kernels {

absl::Status LaunchBags(const DeviceBags& bags, cudaStream_t stream) {
  if (!IsDataType(bags.table_type) || !IsValueType(bags.out_type)) {
    return absl::InvalidArgumentError(
        absl::StrCat("LaunchBags: table type ", static_cast<int>(bags.table_type), ", answer type ",
                     static_cast<int>(bags.out_type)));
  }
  if (bags.dim < 1 || bags.rows < 0 || bags.num_bags < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("LaunchBags: dim ", bags.dim, ", rows ", bags.rows, ", bags ", bags.num_bags));
  }
  if (bags.num_bags == 0) {
    return absl::OkStatus();
  }
  if (bags.table == nullptr || bags.ids == nullptr || bags.out == nullptr) {
    return absl::InvalidArgumentError("LaunchBags: null table, ids or answer");
  }
  if ((bags.cached.slots == nullptr) != (bags.cached.cache == nullptr)) {
    return absl::InvalidArgumentError("LaunchBags: a cache needs its slots, and slots a cache");
  }
  return CudaStatus(bags::LaunchBagKernel(bags, stream), "bag kernel launch");
}

absl::Status LaunchQuantizedGather(const void* d_table, DataType table_type, int64_t num_rows,
                                   int64_t dim, const int64_t* d_ids, int64_t num_ids, void* d_out,
                                   DataType out_type, cudaStream_t stream) {
  DeviceBags bags;
  bags.table = d_table;
  bags.table_type = table_type;
  bags.rows = num_rows;
  bags.dim = dim;
  bags.ids = d_ids;
  bags.num_bags = num_ids;
  bags.out = d_out;
  bags.out_type = out_type;
  return LaunchBags(bags, stream);
}

}  // namespace emb::kernels
