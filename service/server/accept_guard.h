// AcceptGuard: keeps gRPC's listeners alive when the process runs out of file descriptors.
//
// gRPC 1.51's TCP listener stops accepting for good the first time accept4() fails with EMFILE or
// ENFILE (it re-arms only on EAGAIN), so a flood of connections past the open-file limit would
// leave the server deaf until restarted, even once the flood had gone. This
// file defines accept4() for the process, in front of the C library's: where the call fails for
// want of a descriptor, it sheds the connections waiting on that listener (each accepted on a
// descriptor kept in reserve for this, and closed at once: the client sees the connection reset
// and may retry) and answers EAGAIN, so that gRPC waits for the next connection as it does when
// none is waiting. Once descriptors are free again, connections are accepted as before.
//
// Thread-safe; accept4() may be called from any thread.
#ifndef EMB_SERVICE_SERVER_ACCEPT_GUARD_H_
#define EMB_SERVICE_SERVER_ACCEPT_GUARD_H_

#include <cstdint>

namespace emb::service {

// Opens the reserve descriptor (once; later calls do nothing). Until it is called, accept4()
// still answers EAGAIN instead of EMFILE, without shedding.
void InstallAcceptGuard();

// Connections shed for want of a descriptor since the process started.
uint64_t ShedConnectionCount();

}  // namespace emb::service

#endif  // EMB_SERVICE_SERVER_ACCEPT_GUARD_H_
