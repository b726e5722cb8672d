#include "plugins/comm_gloo/wire_bytes.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <linux/tcp.h>  // struct tcp_info with tcpi_bytes_sent (glibc's lacks it)
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <string>

namespace ddph {
namespace comm_gloo {
namespace {

// Reads the bytes sent on fd (a descriptor of ours, so it is the socket),
// each byte once: retransmissions are left out. They depend on the
// machine's load, not on what was sent (a tail-loss probe resends a whole
// small message when the peer's ACK is late), and would make the same
// collective count differently from run to run.
bool read_bytes_sent(int fd, uint64_t* out) {
  struct tcp_info info {};
  socklen_t len = sizeof info;
  if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len) != 0) return false;
  if (len < offsetof(struct tcp_info, tcpi_bytes_retrans) + sizeof info.tcpi_bytes_retrans)
    return false;
  *out = info.tcpi_bytes_sent - std::min(info.tcpi_bytes_sent, info.tcpi_bytes_retrans);
  return true;
}

bool is_established_tcp(int fd) {
  int type = 0, domain = 0;
  socklen_t len = sizeof type;
  if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0 || type != SOCK_STREAM) return false;
  len = sizeof domain;
  if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len) != 0) return false;
  if (domain != AF_INET && domain != AF_INET6) return false;
  struct tcp_info info {};
  len = sizeof info;
  return getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len) == 0 &&
         info.tcpi_state == 1 /* TCP_ESTABLISHED */;
}

// "address:port" of one end of a socket (peer: the other side's).
bool end_name(int fd, bool peer, std::string* out) {
  struct sockaddr_storage ss {};
  socklen_t len = sizeof ss;
  auto* sa = reinterpret_cast<struct sockaddr*>(&ss);
  if ((peer ? getpeername(fd, sa, &len) : getsockname(fd, sa, &len)) != 0) return false;
  char text[INET6_ADDRSTRLEN] = {0};
  unsigned port = 0;
  if (ss.ss_family == AF_INET) {
    auto* in = reinterpret_cast<struct sockaddr_in*>(&ss);
    if (inet_ntop(AF_INET, &in->sin_addr, text, sizeof text) == nullptr) return false;
    port = ntohs(in->sin_port);
  } else if (ss.ss_family == AF_INET6) {
    auto* in6 = reinterpret_cast<struct sockaddr_in6*>(&ss);
    if (inet_ntop(AF_INET6, &in6->sin6_addr, text, sizeof text) == nullptr) return false;
    port = ntohs(in6->sin6_port);
  } else {
    return false;
  }
  *out = std::string(text) + ":" + std::to_string(port);
  return true;
}

}  // namespace

FdSnapshot FdSnapshot::take() {
  // Names, not descriptors: readlink on /proc/self/fd/N says "socket:[ino]"
  // without touching descriptor N, which gloo's device thread may be closing
  // right now (an fstat there is a race on the descriptor).
  FdSnapshot snap;
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return snap;
  const int own = dirfd(dir);
  while (struct dirent* e = readdir(dir)) {
    char* end = nullptr;
    long fd = strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0' || fd == own) continue;
    char link[64];
    const std::string path = std::string("/proc/self/fd/") + e->d_name;
    const ssize_t n = readlink(path.c_str(), link, sizeof link - 1);
    if (n <= 0) continue;
    link[n] = '\0';
    unsigned long long ino = 0;
    if (std::sscanf(link, "socket:[%llu]", &ino) == 1) snap.fds.emplace(int(fd), ino_t(ino));
  }
  closedir(dir);
  return snap;
}

WireBytes::~WireBytes() {
  for (Socket& s : sockets_)
    if (s.fd >= 0) close(s.fd);
}

std::vector<SocketEnds> WireBytes::track_new_sockets(const FdSnapshot& before,
                                                     const FdSnapshot& after, const void* owner) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<SocketEnds> ends;
  for (const auto& fd_ino : after.fds) {
    if (before.fds.count(fd_ino) != 0) continue;
    // Duplicated first, then checked through the duplicate: from here on
    // nothing gloo does to its own descriptor can change what we read.
    const int own = fcntl(fd_ino.first, F_DUPFD_CLOEXEC, 0);
    if (own < 0) continue;
    struct stat st;
    uint64_t base = 0;
    if (fstat(own, &st) != 0 || st.st_ino != fd_ino.second || !is_established_tcp(own) ||
        !read_bytes_sent(own, &base)) {
      close(own);
      continue;
    }
    std::string local, remote;
    if (end_name(own, false, &local) && end_name(own, true, &remote))
      ends.push_back(SocketEnds{sockets_.size(), local, remote});
    sockets_.push_back(Socket{own, base, 0, -1, owner});
  }
  return ends;
}

void WireBytes::refresh(Socket& s) {
  uint64_t now = 0;
  if (s.fd >= 0 && read_bytes_sent(s.fd, &now) && now >= s.base && now - s.base > s.last)
    s.last = now - s.base;
}

void WireBytes::release(const void* owner) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (Socket& s : sockets_) {
    if (s.owner != owner || s.fd < 0) continue;
    refresh(s);
    close(s.fd);
    s.fd = -1;
  }
}

void WireBytes::set_peer(size_t index, int peer) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (index < sockets_.size()) sockets_[index].peer = peer;
}

size_t WireBytes::set_send_buffer(const void* owner, int bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  size_t set = 0;
  for (const Socket& s : sockets_)
    if (s.owner == owner && s.peer >= 0 && s.fd >= 0 &&
        setsockopt(s.fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof bytes) == 0)
      ++set;
  return set;
}

uint64_t WireBytes::sum(int peer) {
  std::lock_guard<std::mutex> lock(mutex_);
  uint64_t sum = 0;
  for (Socket& s : sockets_) {
    refresh(s);
    if (peer == kAll || s.peer == peer) sum += s.last;
  }
  return sum;
}

uint64_t WireBytes::total() {
  return sum(kAll);
}

uint64_t WireBytes::to_peer(int peer) {
  return peer < 0 ? 0 : sum(peer);
}

}  // namespace comm_gloo
}  // namespace ddph
