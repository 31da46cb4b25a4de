// DemoTable: the rows a server started with --demo_table=ROWSxDIM --demo_seed=SEED serves, made
// in-process from the same seed, as the reference that integration tests compare answers with.
//
//   const testing::DemoTable table(1000, 64, /*seed=*/42);
//   EXPECT_TRUE(result->data == table.Rows(ids, DataType::kFloat16));
//
// Thread-safe once constructed; header-only.
#ifndef EMB_TESTS_TESTING_DEMO_TABLE_H_
#define EMB_TESTS_TESTING_DEMO_TABLE_H_

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/types/span.h"
#include "kernels/cpu_gather.h"
#include "kernels/data_type.h"
#include "service/tables/table_source.h"

namespace emb::testing {

class DemoTable {
 public:
  DemoTable(int64_t rows, int64_t dim, uint64_t seed) : rows_(rows), dim_(dim) {
    auto source = service::TableSource::Demo("demo", rows, dim, seed);
    bytes_.resize(source->bytes());
    if (absl::Status s = source->Read(0, absl::MakeSpan(bytes_)); !s.ok()) {
      std::fprintf(stderr, "DemoTable: %s\n", std::string(s.message()).c_str());
      std::abort();  // the reference itself is broken: no test result would mean anything
    }
  }

  int64_t rows() const { return rows_; }
  int64_t dim() const { return dim_; }

  // The answer's bytes for `ids`, converted to `out_type`, as the server sends them.
  std::string Rows(absl::Span<const int64_t> ids, DataType out_type = DataType::kFloat32) const {
    std::string out(ids.size() * static_cast<size_t>(dim_) * ElementSize(out_type), '\0');
    kernels::CpuGather(bytes_.data(), DataType::kFloat32, dim_, ids, out_type,
                       reinterpret_cast<std::byte*>(out.data()));
    return out;
  }

 private:
  int64_t rows_;
  int64_t dim_;
  std::vector<std::byte> bytes_;
};

}  // namespace emb::testing

#endif  // EMB_TESTS_TESTING_DEMO_TABLE_H_
