// PowerLaw: ranks of a bounded power law over `ranks` ranks (rank 0 the most likely), as the host
// tier's benchmarks draw their ids. A draw inverts the continuous law (a bounded Pareto:
// x = (((ranks + 1)^(1-e) - 1) u + 1)^(1/(1-e)), rank floor(x) - 1), so that it costs a pow and
// not a search of a table of every rank. Exponent 0 is uniform; exponent 1 is not supported.
#ifndef EMB_BENCH_COMMON_POWER_LAW_H_
#define EMB_BENCH_COMMON_POWER_LAW_H_

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace emb::bench {

class PowerLaw {
 public:
  PowerLaw(int64_t ranks, double exponent) : ranks_(ranks), exponent_(exponent) {}

  // The rank for `u`, uniform in [0, 1).
  int64_t Rank(double u) const {
    int64_t rank;
    if (exponent_ == 0) {
      rank = static_cast<int64_t>(u * static_cast<double>(ranks_));
    } else {
      const double a = 1.0 - exponent_;
      const double x =
          std::pow((std::pow(static_cast<double>(ranks_ + 1), a) - 1.0) * u + 1.0, 1.0 / a);
      rank = static_cast<int64_t>(x) - 1;
    }
    return std::clamp<int64_t>(rank, 0, ranks_ - 1);
  }

  // The probability of the `k` most likely ranks: the hit rate of an ideal static cache of k rows.
  double TopShare(int64_t k) const {
    if (exponent_ == 0) {
      return static_cast<double>(k) / static_cast<double>(ranks_);
    }
    const double a = 1.0 - exponent_;
    return (std::pow(static_cast<double>(k + 1), a) - 1.0) /
           (std::pow(static_cast<double>(ranks_ + 1), a) - 1.0);
  }

 private:
  int64_t ranks_;
  double exponent_;
};

}  // namespace emb::bench

#endif  // EMB_BENCH_COMMON_POWER_LAW_H_
