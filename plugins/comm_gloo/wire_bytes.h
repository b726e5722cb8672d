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
//
// We read through our own duplicate of each descriptor: gloo's device
// thread closes a pair's descriptor when its peer hangs up, and a number
// gloo closed can be reused by the next socket before we read it (ThreadSanitizer
// reported exactly that race). A duplicate also keeps the connection open, so
// a communicator releases its duplicates before it closes or hard-closes its
// pairs, or its peers would not see the close.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <mutex>
#include <set>
#include <string>
#include <vector>

namespace ddph {
namespace comm_gloo {

// The set of (fd, inode) pairs open in this process.
struct FdSnapshot {
  std::set<std::pair<int, ino_t>> fds;
  static FdSnapshot take();
};

// Per peer: each socket's two ends, as "address:port" text, are published
// through the store at connect time (endpoints.cpp); the socket whose ends
// another rank lists the other way round leads to that rank. A socket no
// rank lists (one the host opened meanwhile) counts in total() only.
struct SocketEnds {
  size_t index;        // in WireBytes' tracked sockets
  std::string local;   // this side, e.g. "127.0.0.1:41234"
  std::string remote;  // the other side
};

class WireBytes {
 public:
  WireBytes() = default;
  ~WireBytes();
  WireBytes(const WireBytes&) = delete;
  WireBytes& operator=(const WireBytes&) = delete;

  // Tracks the established TCP sockets that are in `after` but not in
  // `before` for `owner` (the communicator whose pairs they are), and
  // returns their ends. Call right after connectFullMesh.
  std::vector<SocketEnds> track_new_sockets(const FdSnapshot& before, const FdSnapshot& after,
                                            const void* owner);
  // Takes a last reading of owner's sockets and closes our duplicates of
  // them; their counts stay in the totals. [thread-safe]
  void release(const void* owner);
  // The tracked socket `index` leads to world rank `peer` (the rank in the
  // communicator this count was first made for).
  void set_peer(size_t index, int peer);
  // Sets SO_SNDBUF to `bytes` (the kernel caps it at net.core.wmem_max) on
  // owner's sockets that lead to a known peer, so never on a socket of the
  // host's. Returns how many it set.
  size_t set_send_buffer(const void* owner, int bytes);
  // Bytes sent on the tracked sockets since tracking began. A socket that
  // has closed keeps its last value. [thread-safe]
  uint64_t total();
  // The same, for the sockets that lead to world rank peer. [thread-safe]
  uint64_t to_peer(int peer);

 private:
  struct Socket {
    int fd;  // our duplicate; -1 once released
    uint64_t base;
    uint64_t last;
    int peer;  // world rank, or -1 when unknown
    const void* owner;
  };
  // Updates s.last from the kernel while the duplicate is open.
  static void refresh(Socket& s);
  // Sum over the sockets leading to peer, or over all for peer == kAll.
  uint64_t sum(int peer);
  static constexpr int kAll = -2;
  std::mutex mutex_;
  std::vector<Socket> sockets_;
};

}  // namespace comm_gloo
}  // namespace ddph
