// Sanitizer canaries: each mode commits one defect the sanitized build must report (or, for
// "mutex", must not), so that scripts/sanitize proves its own setup: the flags reach our code,
// the options stop the process, and the suppressions and the instrumented Abseil neither hide a
// race in our code nor invent one across absl::Mutex. Registered by tests/sanitizers/CMakeLists.txt
// only in sanitized builds, each with the report it must print.
//   sanitizer_canary overflow|use_after_free|signed_overflow|leak|race|mutex
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <thread>

#include "absl/synchronization/mutex.h"

namespace {

// Keep the compiler from proving the defects away.
volatile int g_sink = 0;
int* volatile g_leaked = nullptr;

int Overflow() {
  int* a = new int[4];
  const int i = 4 + g_sink;
  a[i] = 1;  // one past the end
  const int v = a[0];
  delete[] a;
  return v;
}

int UseAfterFree() {
  int* a = new int[4]();
  delete[] a;
  return a[g_sink];
}

int SignedOverflow() {
  int v = std::numeric_limits<int>::max() - g_sink;
  return v + 1;
}

int Leak() {
  g_leaked = new int[64];
  g_leaked = nullptr;  // the only pointer is gone before exit
  return 0;
}

int Race() {
  int x = 0;
  std::thread t([&x] { x = 1; });
  x = 2;  // no ordering with the thread's write
  t.join();
  return x;
}

// The same two writes, ordered by an absl::Mutex: clean only if TSan sees the Mutex.
int Mutex() {
  absl::Mutex mu;
  int x = 0;
  std::thread t([&] {
    absl::MutexLock lock(&mu);
    x = 1;
  });
  {
    absl::MutexLock lock(&mu);
    x = 2;
  }
  t.join();
  return x;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  int v;
  if (mode == "overflow") {
    v = Overflow();
  } else if (mode == "use_after_free") {
    v = UseAfterFree();
  } else if (mode == "signed_overflow") {
    v = SignedOverflow();
  } else if (mode == "leak") {
    v = Leak();
  } else if (mode == "race") {
    v = Race();
  } else if (mode == "mutex") {
    v = Mutex();
  } else {
    std::fprintf(stderr, "usage: %s overflow|use_after_free|signed_overflow|leak|race|mutex\n",
                 argv[0]);
    return 2;
  }
  std::printf("sanitizer_canary %s: no report (%d)\n", mode.c_str(), v);
  return 0;
}
