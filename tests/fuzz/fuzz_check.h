// FUZZ_CHECK(cond): a property every input must keep; a violation aborts, which libFuzzer (and
// replay_main.cc) reports as a crash with the input that caused it.
#ifndef EMB_TESTS_FUZZ_FUZZ_CHECK_H_
#define EMB_TESTS_FUZZ_FUZZ_CHECK_H_

#include <cstdio>
#include <cstdlib>

#define FUZZ_CHECK(cond)                                                                 \
  do {                                                                                   \
    if (!(cond)) {                                                                       \
      std::fprintf(stderr, "%s:%d: FUZZ_CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                      \
    }                                                                                    \
  } while (0)

#endif  // EMB_TESTS_FUZZ_FUZZ_CHECK_H_
