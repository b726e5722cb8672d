#include "core/comm/rendezvous/tcp_socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/base/error.h"
#include "core/comm/rendezvous/tcp_protocol.h"

namespace ddph {
namespace rendezvous {
namespace tcp {
namespace {

// Waits for events on fd until deadline; false when the deadline passed.
bool wait_for(int fd, short events, Deadline deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int n = poll(&p, 1, poll_ms_until(deadline));
    if (n > 0) return true;
    if (n < 0 && errno == EINTR) continue;
    if (n == 0 && Clock::now() >= deadline) return false;
    if (n < 0) return true;  // the next call reports the error
  }
}

// Connects fd to addr within deadline; 0 or an errno.
int connect_within(int fd, const addrinfo* a, Deadline deadline) {
  if (connect(fd, a->ai_addr, a->ai_addrlen) == 0) return 0;
  if (errno != EINPROGRESS) return errno;
  if (!wait_for(fd, POLLOUT, deadline)) return ETIMEDOUT;
  int err = 0;
  socklen_t len = sizeof err;
  if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) return errno;
  return err;
}

Io send_all(int fd, const char* p, size_t n, Deadline deadline, std::string* why) {
  while (n > 0) {
    const ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
    if (k > 0) {
      p += k;
      n -= size_t(k);
      continue;
    }
    if (k < 0 && errno == EINTR) continue;
    if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (!wait_for(fd, POLLOUT, deadline)) return Io::kTimeout;
      continue;
    }
    *why = std::string("sending failed: ") + strerror(errno);
    return Io::kClosed;
  }
  return Io::kOk;
}

Io recv_all(int fd, char* p, size_t n, Deadline deadline, std::string* why) {
  while (n > 0) {
    const ssize_t k = recv(fd, p, n, 0);
    if (k > 0) {
      p += k;
      n -= size_t(k);
      continue;
    }
    if (k == 0) {
      *why = "the connection was closed";
      return Io::kClosed;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (!wait_for(fd, POLLIN, deadline)) return Io::kTimeout;
      continue;
    }
    *why = std::string("receiving failed: ") + strerror(errno);
    return Io::kClosed;
  }
  return Io::kOk;
}

}  // namespace

void Fd::reset() {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
}

int poll_ms_until(Deadline deadline) {
  const auto left = deadline - Clock::now();
  if (left <= Clock::duration::zero()) return 0;
  // Rounded up, so that a wait never ends before its deadline.
  const auto ms = std::chrono::ceil<std::chrono::milliseconds>(left).count();
  return int(std::min<int64_t>(ms, 1 << 30));
}

Fd connect_once(const std::string& host, int port, Deadline deadline, std::string* why,
                bool* retry) {
  *retry = true;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int rc = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found);
  if (rc != 0) {
    *why = std::string("cannot resolve '") + host + "': " + gai_strerror(rc);
    *retry = rc == EAI_AGAIN;
    return Fd();
  }
  std::string last;
  for (const addrinfo* a = found; a != nullptr; a = a->ai_next) {
    Fd fd(socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol));
    if (!fd.valid()) {
      last = std::string("socket: ") + strerror(errno);
      continue;
    }
    const int err = connect_within(fd.get(), a, deadline);
    if (err == 0) {
      const int one = 1;
      setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      freeaddrinfo(found);
      return fd;
    }
    last = strerror(err);
  }
  freeaddrinfo(found);
  *why = last.empty() ? "no address" : last;
  return Fd();
}

Io send_frame(int fd, const std::string& body, Deadline deadline, std::string* why) {
  std::string out(4, '\0');
  const uint32_t n = uint32_t(body.size());
  for (int i = 0; i < 4; ++i) out[size_t(i)] = char(uint8_t(n >> (8 * i)));
  out += body;
  return send_all(fd, out.data(), out.size(), deadline, why);
}

Io recv_frame(int fd, std::string* body, Deadline deadline, std::string* why) {
  unsigned char head[4];
  Io io = recv_all(fd, reinterpret_cast<char*>(head), 4, deadline, why);
  if (io != Io::kOk) return io;
  const uint32_t n = uint32_t(head[0]) | uint32_t(head[1]) << 8 | uint32_t(head[2]) << 16 |
                     uint32_t(head[3]) << 24;
  if (n > kMaxFrame) {
    *why = "the peer sent a frame of " + std::to_string(n) + " bytes (not a ddph tcp store?)";
    return Io::kClosed;
  }
  body->assign(n, '\0');
  return recv_all(fd, n ? &(*body)[0] : nullptr, n, deadline, why);
}

Fd listen_on(int port, const std::string& url) {
  auto bind_any = [port](int family, int* err) {
    Fd fd(socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!fd.valid()) {
      *err = errno;
      return fd;
    }
    // Rebinding while connections of an earlier run of the port linger in
    // TIME_WAIT; a socket that listens on it still makes bind fail.
    const int one = 1, zero = 0;
    setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    int rc;
    if (family == AF_INET6) {
      setsockopt(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
      sockaddr_in6 a{};
      a.sin6_family = AF_INET6;
      a.sin6_addr = in6addr_any;
      a.sin6_port = htons(uint16_t(port));
      rc = bind(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a);
    } else {
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_addr.s_addr = htonl(INADDR_ANY);
      a.sin_port = htons(uint16_t(port));
      rc = bind(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a);
    }
    if (rc == 0) rc = listen(fd.get(), SOMAXCONN);
    *err = rc == 0 ? 0 : errno;
    if (rc != 0) fd.reset();
    return fd;
  };
  int err = 0;
  Fd fd = bind_any(AF_INET6, &err);
  // No IPv6 on this host (or in this network namespace): IPv4 alone.
  if (!fd.valid() && err != EADDRINUSE && err != EACCES) fd = bind_any(AF_INET, &err);
  DDPH_CHECK(err != EADDRINUSE, DDPH_INVALID_ARGUMENT,
             url << ": port " << port
                 << " is in use (another job or process listens on it), so rank 0 cannot serve "
                    "the rendezvous store there; choose another MASTER_PORT / port (or, "
                    "for env://, DDPH_MASTER_PORT)");
  DDPH_CHECK(fd.valid(), DDPH_COMM_FAILURE,
             url << ": rank 0 cannot listen on port " << port << ": " << strerror(err));
  return fd;
}

std::string peer_of(int fd) {
  sockaddr_storage a{};
  socklen_t len = sizeof a;
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) return "?";
  char host[NI_MAXHOST] = "?", serv[NI_MAXSERV] = "?";
  getnameinfo(reinterpret_cast<sockaddr*>(&a), len, host, sizeof host, serv, sizeof serv,
              NI_NUMERICHOST | NI_NUMERICSERV);
  std::string h = host;
  if (h.rfind("::ffff:", 0) == 0) h = h.substr(7);  // an IPv4 peer of a dual-stack socket
  if (h.find(':') != std::string::npos) h = "[" + h + "]";
  return h + ":" + serv;
}

}  // namespace tcp
}  // namespace rendezvous
}  // namespace ddph
