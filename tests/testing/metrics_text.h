// Reading a Prometheus text exposition in tests.
#ifndef EMB_TESTS_TESTING_METRICS_TEXT_H_
#define EMB_TESTS_TESTING_METRICS_TEXT_H_

#include <string>

namespace emb::testing {

// The value of the first sample line of the exposition that starts with `series`; -1 if none.
inline double Sample(const std::string& metrics, const std::string& series) {
  for (size_t pos = 0; (pos = metrics.find(series, pos)) != std::string::npos; ++pos) {
    if (pos == 0 || metrics[pos - 1] == '\n') {
      const size_t end = metrics.find('\n', pos);
      const std::string line = metrics.substr(pos, end - pos);
      return std::stod(line.substr(line.rfind(' ') + 1));
    }
  }
  return -1;
}

}  // namespace emb::testing

#endif  // EMB_TESTS_TESTING_METRICS_TEXT_H_
