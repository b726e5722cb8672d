// Counting the bytes this rank really put on the wire.
//
// Method: gloo's TCP pairs are the stream sockets that appear in
// /proc/self/fd while connectFullMesh runs. For each of them we read the
// kernel's TCP_INFO tcpi_bytes_sent (payload bytes handed to the network,
// retransmissions included, TCP/IP headers excluded; Linux >= 4.19) and
// subtract its value at connect time. This counts what gloo's algorithms
// really send, framing included, rather than what we think they send.
// Caveat: a socket another thread of the host opens during those few
// milliseconds would be counted too (two ranks in one process included).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <mutex>
#include <set>
#include <vector>

namespace ddph {
namespace comm_gloo {

// The set of (fd, inode) pairs open in this process.
struct FdSnapshot {
  std::set<std::pair<int, ino_t>> fds;
  static FdSnapshot take();
};

class WireBytes {
 public:
  // Tracks the established TCP sockets that are in `after` but not in
  // `before`. Call right after connectFullMesh.
  void track_new_sockets(const FdSnapshot& before, const FdSnapshot& after);
  // Bytes sent on the tracked sockets since tracking began. A socket that
  // has closed keeps its last value. [thread-safe]
  uint64_t total();
  size_t num_sockets() const { return sockets_.size(); }

 private:
  struct Socket {
    int fd;
    ino_t ino;
    uint64_t base;
    uint64_t last;
  };
  std::mutex mutex_;
  std::vector<Socket> sockets_;
};

}  // namespace comm_gloo
}  // namespace ddph
