// The command-line flags of the benchmark programs, written --name=value. Arguments that name no
// flag the program reads are ignored, as are later repeats of one (the first counts). Numbers are
// checked against a lower bound; a bad one does not stop the reading, so that a program reads all
// its flags first and then checks status() once, exiting the way it exits on any other usage
// error. Not thread-safe; a program reads its flags on one thread before starting others.
#ifndef EMB_BENCH_COMMON_BENCH_FLAGS_H_
#define EMB_BENCH_COMMON_BENCH_FLAGS_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace emb::bench {

class Flags {
 public:
  // `argv` must outlive this object.
  Flags(int argc, char** argv) : argc_(argc), argv_(argv) {}

  // The value of --name, or `fallback` where it is absent.
  std::string Get(absl::string_view name, absl::string_view fallback) const;
  // The value of --name as a whole number (a real one for Double) of at least `min`, or
  // `fallback` where it is absent. A value that is no such number returns `fallback` and sets
  // status() if no earlier flag has.
  int64_t Int(absl::string_view name, int64_t fallback, int64_t min);
  double Double(absl::string_view name, double fallback, double min);

  // OK, or INVALID_ARGUMENT naming the first bad flag and its value.
  const absl::Status& status() const { return status_; }

 private:
  // The text after --name=, or nullptr.
  const char* Find(absl::string_view name) const;
  void Fail(absl::string_view name, absl::string_view text, absl::string_view wanted);

  int argc_;
  char** argv_;
  absl::Status status_;
};

}  // namespace emb::bench

#endif  // EMB_BENCH_COMMON_BENCH_FLAGS_H_
