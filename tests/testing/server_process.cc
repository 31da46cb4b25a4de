#include "tests/testing/server_process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <regex>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace emb::testing {

std::string ServerProcess::BinaryPath() {
  const char* env = getenv("EMB_SERVER_BINARY");  // where the build tree is not (the GPU host)
  return env != nullptr ? env : EMB_SERVER_BINARY;
}

std::string ServerProcess::TestDevice() {
  const char* env = getenv("EMB_TEST_DEVICE");
  return env != nullptr ? env : "cpu";
}

bool ServerProcess::TestOnCpu() {
  const std::string devices = TestDevice();
  size_t start = 0;
  while (true) {
    const size_t comma = devices.find(',', start);
    if (devices.substr(start, comma == std::string::npos ? std::string::npos : comma - start) !=
        "cpu") {
      return false;
    }
    if (comma == std::string::npos) {
      return true;
    }
    start = comma + 1;
  }
}

absl::Status ServerProcess::Spawn(std::vector<std::string> args) {
  auto has = [&](const std::string& prefix) {
    for (const std::string& a : args) {
      if (a.rfind(prefix, 0) == 0) {
        return true;
      }
    }
    return false;
  };
  if (!has("--grpc_address")) {
    args.push_back("--grpc_address=127.0.0.1:0");
  }
  if (!has("--metrics_address")) {
    args.push_back("--metrics_address=127.0.0.1:0");
  }
  if (!has("--device")) {
    args.push_back("--device=" + TestDevice());
    const char* placement = getenv("EMB_TEST_PLACEMENT");
    if (placement != nullptr && !has("--placement")) {
      args.push_back(std::string("--placement=") + placement);
    }
  }
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    return absl::InternalError("pipe failed");
  }
  const std::string binary = BinaryPath();
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(binary.c_str()));
  for (std::string& a : args) {
    argv.push_back(a.data());
  }
  argv.push_back(nullptr);
  pid_ = fork();
  if (pid_ < 0) {
    return absl::InternalError("fork failed");
  }
  if (pid_ == 0) {
    dup2(fds[1], STDERR_FILENO);
    dup2(fds[1], STDOUT_FILENO);
    execv(binary.c_str(), argv.data());
    _exit(127);
  }
  close(fds[1]);
  reader_ = std::thread([this, fd = fds[0]] { ReadLog(fd); });
  return absl::OkStatus();
}

void ServerProcess::ReadLog(int fd) {
  char buf[4096];
  for (;;) {
    const ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) {
      continue;
    }
    absl::MutexLock lock(&mu_);
    if (n <= 0) {
      log_closed_ = true;
      break;
    }
    log_.append(buf, static_cast<size_t>(n));
  }
  close(fd);
}

absl::StatusOr<std::unique_ptr<ServerProcess>> ServerProcess::Start(std::vector<std::string> args,
                                                                    absl::Duration timeout,
                                                                    const std::string& ready_text) {
  auto server = std::unique_ptr<ServerProcess>(new ServerProcess());
  if (absl::Status s = server->Spawn(std::move(args)); !s.ok()) {
    return s;
  }
  {
    absl::MutexLock lock(&server->mu_);
    auto ready = [&server, &ready_text]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
      const std::string& log = server->log_;
      return server->log_closed_ || (log.find(ready_text) != std::string::npos &&
                                     log.find("gRPC listening on") != std::string::npos &&
                                     log.find("/metrics\n") != std::string::npos);
    };
    if (!server->mu_.AwaitWithTimeout(absl::Condition(&ready), timeout)) {
      return absl::DeadlineExceededError(absl::StrCat(
          "server not serving after ", absl::FormatDuration(timeout), "; log:\n", server->log_));
    }
    if (server->log_closed_) {
      return absl::FailedPreconditionError(
          absl::StrCat("server exited during start-up; log:\n", server->log_));
    }
    std::smatch m;
    if (std::regex_search(server->log_, m, std::regex("gRPC listening on [^ ]*:([0-9]+)"))) {
      server->grpc_port_ = std::stoi(m[1]);
    }
    if (std::regex_search(server->log_, m, std::regex("metrics on http://[^ ]*:([0-9]+)/"))) {
      server->metrics_port_ = std::stoi(m[1]);
    }
    if (std::regex_search(server->log_, m,
                          std::regex("admin service \\(UpdateRows\\) on [^ ]*:([0-9]+),"))) {
      server->admin_port_ = std::stoi(m[1]);
    }
  }
  return server;
}

ServerProcess::Exit ServerProcess::RunToExit(std::vector<std::string> args,
                                             absl::Duration timeout) {
  ServerProcess p;
  Exit exit;
  if (!p.Spawn(std::move(args)).ok()) {
    return exit;
  }
  exit.code = p.WaitExit(timeout);
  exit.log = p.log();
  return exit;
}

void ServerProcess::Signal(int signal) const {
  if (pid_ > 0 && exit_code_ < 0) {
    kill(pid_, signal);
  }
}

int ServerProcess::WaitExit(absl::Duration timeout) {
  if (exit_code_ >= 0 || pid_ <= 0) {
    return exit_code_;
  }
  const absl::Time end = absl::Now() + timeout;
  for (;;) {
    int status = 0;
    const pid_t r = waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      break;
    }
    if (absl::Now() > end) {
      return -1;
    }
    absl::SleepFor(absl::Milliseconds(10));
  }
  if (reader_.joinable()) {
    reader_.join();
  }
  return exit_code_;
}

std::string ServerProcess::log() const {
  absl::MutexLock lock(&mu_);
  return log_;
}

bool ServerProcess::WaitForLog(const std::string& text, absl::Duration timeout) const {
  struct Args {
    const ServerProcess* p;
    const std::string* text;
  } args{this, &text};
  absl::MutexLock lock(&mu_);
  return mu_.AwaitWithTimeout(absl::Condition(
                                  +[](Args* a) ABSL_NO_THREAD_SAFETY_ANALYSIS {
                                    return a->p->log_.find(*a->text) != std::string::npos;
                                  },
                                  &args),
                              timeout);
}

ServerProcess::~ServerProcess() {
  if (pid_ > 0 && exit_code_ < 0) {
    kill(pid_, SIGKILL);
    WaitExit(absl::Seconds(10));
  }
  if (reader_.joinable()) {
    reader_.join();
  }
  const std::string all = log();
  if (const std::string report = SanitizerReport(all); !report.empty()) {
    ADD_FAILURE() << "the server's sanitizer reported: " << report << "\nthe server's log:\n"
                  << all;
  }
}

std::string SanitizerReport(const std::string& log) {
  for (const char* marker :
       {"ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "WARNING: ThreadSanitizer",
        "ThreadSanitizer: ", ": runtime error: "}) {
    if (const size_t at = log.find(marker); at != std::string::npos) {
      const size_t begin = log.rfind('\n', at);
      const size_t start = begin == std::string::npos ? 0 : begin + 1;
      return log.substr(start, log.find('\n', at) - start);
    }
  }
  return "";
}

absl::StatusOr<std::string> HttpGet(int port, const std::string& path) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return absl::UnavailableError(absl::StrCat("connect to 127.0.0.1:", port, " failed"));
  }
  const std::string request =
      absl::StrCat("GET ", path, " HTTP/1.0\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
  (void)!write(fd, request.data(), request.size());
  std::string response;
  char buf[8192];
  ssize_t n;
  while ((n = read(fd, buf, sizeof(buf))) > 0) {
    response.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  const size_t body = response.find("\r\n\r\n");
  if (response.rfind("HTTP/1.", 0) != 0 || body == std::string::npos) {
    return absl::InternalError("malformed HTTP response");
  }
  if (response.find(" 200 ") > body) {
    return absl::InternalError(absl::StrCat("HTTP error: ", response.substr(0, body)));
  }
  return response.substr(body + 4);
}

}  // namespace emb::testing
