// Sockets of the tcp:// store, every wait bounded by a deadline: the
// client's connect and framed exchanges (poll with what is left of the
// deadline, never a blocking call) and the server's listening socket.
#pragma once

#include <string>

#include "core/comm/rendezvous/kv_store.h"

namespace ddph {
namespace rendezvous {
namespace tcp {

// Owns a file descriptor.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() { reset(); }
  Fd(Fd&& o) noexcept : fd_(o.release()) {}
  Fd& operator=(Fd&& o) noexcept {
    if (this != &o) {
      reset();
      fd_ = o.release();
    }
    return *this;
  }
  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }
  void reset();

 private:
  int fd_ = -1;
};

// One attempt to connect to host:port (each of its addresses in turn),
// bounded by deadline. An invalid Fd on failure, with *why saying what
// happened ("connection refused"); *retry is false when trying again
// cannot help (the name does not resolve).
Fd connect_once(const std::string& host, int port, Deadline deadline, std::string* why,
                bool* retry);

enum class Io { kOk, kTimeout, kClosed };

// Sends one frame (u32 length, body) within deadline. kClosed: the peer
// closed or reset the connection; *why says how.
Io send_frame(int fd, const std::string& body, Deadline deadline, std::string* why);
// Receives one frame into *body within deadline; a length above kMaxFrame
// is kClosed with *why saying so.
Io recv_frame(int fd, std::string* body, Deadline deadline, std::string* why);

// A non-blocking socket listening on port on every interface (IPv6 and
// IPv4 where the host has IPv6, else IPv4). Throws DDPH_INVALID_ARGUMENT
// when the port is taken, naming it and `url`; DDPH_COMM_FAILURE for
// any other failure.
Fd listen_on(int port, const std::string& url);

// "127.0.0.1:40000" for a connected socket's peer.
std::string peer_of(int fd);

// What is left until deadline, in whole milliseconds for poll (0 when past).
int poll_ms_until(Deadline deadline);

}  // namespace tcp
}  // namespace rendezvous
}  // namespace ddph
