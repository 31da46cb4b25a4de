// ServerProcess: runs the real embedding-server binary on loopback for integration tests.
//
// The server is started with --grpc_address=127.0.0.1:0, --metrics_address=127.0.0.1:0 and
// --device=TestDevice() (unless the test sets them); its log (stderr) is captured, and the ports it
// chose are read from its start-up lines. Thread-safe.
#ifndef EMB_TESTS_TESTING_SERVER_PROCESS_H_
#define EMB_TESTS_TESTING_SERVER_PROCESS_H_

#include <sys/types.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace emb::testing {

class ServerProcess {
 public:
  // Starts the server and waits until it logs `ready_text` (by default, that it is serving) and
  // both its ports. Errors carry the server's log: it exited first (FAILED_PRECONDITION) or took
  // longer than `timeout` (DEADLINE_EXCEEDED).
  static absl::StatusOr<std::unique_ptr<ServerProcess>> Start(
      std::vector<std::string> args, absl::Duration timeout = absl::Seconds(60),
      const std::string& ready_text = "health SERVING");

  // Starts the server and waits for it to exit by itself (for start-up failures).
  struct Exit {
    int code = -1;  // exit status, or 128 + signal
    std::string log;
  };
  static Exit RunToExit(std::vector<std::string> args, absl::Duration timeout = absl::Seconds(60));

  // Kills the server (SIGKILL) if it still runs. Adds a test failure if its log holds a sanitizer
  // report (SanitizerReport).
  ~ServerProcess();

  std::string target() const { return "127.0.0.1:" + std::to_string(grpc_port_); }
  int grpc_port() const { return grpc_port_; }
  int metrics_port() const { return metrics_port_; }
  // The admin listener's port, where the test started one (--admin_address); else 0.
  int admin_port() const { return admin_port_; }
  std::string admin_target() const { return "127.0.0.1:" + std::to_string(admin_port_); }

  // The server's process id (for /proc/PID), until it has exited.
  pid_t pid() const { return pid_; }
  void Signal(int signal) const;
  // Waits for the server to exit; -1 if it is still running after `timeout`.
  int WaitExit(absl::Duration timeout);
  // Everything the server logged so far.
  std::string log() const;
  // Waits until the log contains `text`; false after `timeout`.
  bool WaitForLog(const std::string& text, absl::Duration timeout) const;

  // The server binary: $EMB_SERVER_BINARY, else the one CMake built.
  static std::string BinaryPath();
  // Whether every device of TestDevice() is the CPU ("cpu", "cpu,cpu").
  static bool TestOnCpu();
  // The --device the tests start servers with: $EMB_TEST_DEVICE (e.g. "cuda:0", or a list:
  // "cpu,cpu"), else "cpu". With a list, the servers also get --placement=$EMB_TEST_PLACEMENT
  // where it is set (replicas or rows).
  static std::string TestDevice();

 private:
  ServerProcess() = default;
  absl::Status Spawn(std::vector<std::string> args);
  void ReadLog(int fd);

  pid_t pid_ = -1;
  int exit_code_ = -1;
  int grpc_port_ = 0;
  int metrics_port_ = 0;
  int admin_port_ = 0;
  std::thread reader_;
  mutable absl::Mutex mu_;
  std::string log_ ABSL_GUARDED_BY(mu_);
  bool log_closed_ ABSL_GUARDED_BY(mu_) = false;
};

// The first line of a sanitizer's report in `log` (AddressSanitizer, LeakSanitizer, UBSan's
// "runtime error:", ThreadSanitizer), or empty. ~ServerProcess fails the running test with the
// server's log when its server's log holds one: a server killed at the end of a test, or one
// whose exit code the test does not check, still fails it (scripts/sanitize).
std::string SanitizerReport(const std::string& log);

// Whether this build is instrumented by a sanitizer (scripts/sanitize): a test whose point is a
// count (calls until a limit, a leak per call) may run fewer repetitions there, where each costs
// several times as much; the plain suite runs them all.
#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
inline constexpr bool kSanitizedBuild = true;
#else
inline constexpr bool kSanitizedBuild = false;
#endif
#else
inline constexpr bool kSanitizedBuild = false;
#endif

// GET http://127.0.0.1:port/path; the body, or an error.
absl::StatusOr<std::string> HttpGet(int port, const std::string& path);

}  // namespace emb::testing

#endif  // EMB_TESTS_TESTING_SERVER_PROCESS_H_
