#include "service/server/listen_address.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace emb::service {

absl::StatusOr<ListenAddress> ParseListenAddress(absl::string_view flag,
                                                 absl::string_view address) {
  const size_t colon = address.rfind(':');
  ListenAddress parsed;
  if (colon == absl::string_view::npos ||
      !absl::SimpleAtoi(address.substr(colon + 1), &parsed.port) || parsed.port < 0 ||
      parsed.port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(
        flag, "=", address, ": expected HOST:PORT with a port in [0, 65535], e.g. 0.0.0.0:50051"));
  }
  parsed.host = std::string(address.substr(0, colon));
  return parsed;
}

std::string WhyCannotBind(const ListenAddress& address) {
  std::string host = address.host;
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  const std::string port = absl::StrCat(address.port);
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (int e = getaddrinfo(host.empty() ? nullptr : host.c_str(), port.c_str(), &hints, &found);
      e != 0) {
    return gai_strerror(e);
  }
  std::string why;
  for (addrinfo* a = found; a != nullptr && why.empty(); a = a->ai_next) {
    const int fd = socket(a->ai_family, a->ai_socktype, a->ai_protocol);
    if (fd < 0) {
      continue;
    }
    const int on = 1;
    (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));  // as gRPC does
    if (bind(fd, a->ai_addr, a->ai_addrlen) != 0) {
      why = errno == EADDRINUSE ? "the port is in use (another server already listens on it?)"
                                : std::strerror(errno);
    }
    close(fd);
  }
  freeaddrinfo(found);
  return why;
}

bool IsLoopbackHost(absl::string_view host) {
  if (host == "localhost") {
    return true;
  }
  const bool bracketed = host.size() >= 2 && host.front() == '[' && host.back() == ']';
  const std::string text(bracketed ? host.substr(1, host.size() - 2) : host);
  in_addr v4{};
  if (!bracketed && inet_pton(AF_INET, text.c_str(), &v4) == 1) {  // dotted decimal only
    return (ntohl(v4.s_addr) >> 24) == 127;
  }
  in6_addr v6{};
  return inet_pton(AF_INET6, text.c_str(), &v6) == 1 && IN6_IS_ADDR_LOOPBACK(&v6);
}

}  // namespace emb::service
