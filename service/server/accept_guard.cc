#include "service/server/accept_guard.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>

#include "absl/base/const_init.h"
#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "service/common/log.h"

namespace emb::service {
namespace {

using Accept4 = int (*)(int, sockaddr*, socklen_t*, int);

// The accept4() this one stands in front of: the next definition after the executable's (the C
// library's, or a sanitizer's interceptor).
Accept4 NextAccept4() {
  static const Accept4 next = reinterpret_cast<Accept4>(dlsym(RTLD_NEXT, "accept4"));
  return next;
}

std::atomic<uint64_t> shed_connections{0};

// Serializes shedding: the reserve descriptor is one.
ABSL_CONST_INIT absl::Mutex shed_mu(absl::kConstInit);
int reserve_fd ABSL_GUARDED_BY(shed_mu) = -1;
bool installed ABSL_GUARDED_BY(shed_mu) = false;
absl::Time last_log ABSL_GUARDED_BY(shed_mu) = absl::InfinitePast();

int OpenReserve() { return open("/dev/null", O_RDONLY | O_CLOEXEC); }

// Accepts and closes every connection waiting on `listener`, each on the reserve descriptor;
// returns how many. Stops early where the reserve cannot be had back (another thread took the
// descriptor it freed): the listener then waits for its next connection, still alive.
uint64_t ShedWaitingConnections(int listener) ABSL_EXCLUSIVE_LOCKS_REQUIRED(shed_mu) {
  uint64_t shed = 0;
  while (reserve_fd >= 0) {
    close(reserve_fd);
    const int fd = NextAccept4()(listener, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd >= 0) {
      close(fd);
      ++shed;
    }
    reserve_fd = OpenReserve();
    if (fd < 0) {
      break;  // none waiting (EAGAIN), or the freed descriptor was taken meanwhile
    }
  }
  return shed;
}

}  // namespace

void InstallAcceptGuard() {
  absl::MutexLock lock(&shed_mu);
  if (installed) {
    return;
  }
  installed = true;
  reserve_fd = OpenReserve();
}

uint64_t ShedConnectionCount() { return shed_connections.load(std::memory_order_relaxed); }

}  // namespace emb::service

// The process's accept4(): the executable's definition comes before the C library's for every
// caller, gRPC's shared library included (CMakeLists.txt exports it).
extern "C" int accept4(int listener, sockaddr* addr, socklen_t* addr_len, int flags) {
  namespace svc = emb::service;
  const int fd = svc::NextAccept4()(listener, addr, addr_len, flags);
  if (fd >= 0 || (errno != EMFILE && errno != ENFILE)) {
    return fd;
  }
  const int out_of = errno;
  {
    absl::MutexLock lock(&svc::shed_mu);
    if (svc::reserve_fd < 0 && svc::installed) {
      svc::reserve_fd = svc::OpenReserve();  // lost to a race before; perhaps free again now
    }
    const uint64_t shed = svc::ShedWaitingConnections(listener);
    svc::shed_connections.fetch_add(shed, std::memory_order_relaxed);
    const absl::Time now = absl::Now();
    if (now - svc::last_log >= absl::Seconds(10)) {
      svc::last_log = now;
      svc::LogError("out of file descriptors (", out_of == EMFILE ? "EMFILE" : "ENFILE",
                    "): new connections are closed as they come until some are free (",
                    svc::ShedConnectionCount(),
                    " shed so far; the open-file limit is logged at start-up)");
    }
  }
  errno = EAGAIN;
  return -1;
}
