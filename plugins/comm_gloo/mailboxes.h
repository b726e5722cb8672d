// Bound gloo buffers that carry small messages without a handshake.
//
// An unbound-buffer message (every other collective here) costs three
// writes and a round trip through both ranks' device threads before its
// data moves: the receiver announces its receive, the sender announces its
// send, and the sender's device thread writes the data once the announcement
// arrives. A bound buffer, registered with its pair once, receives whatever
// the peer writes to its slot, so a message is one write. For a 1 KB
// allreduce at two ranks on a 2-core machine that halves the time again
// after the ring's four dependent messages became one exchange.
//
// Each peer has two inboxes (message parities 0 and 1) and this rank one
// outbox per parity. A rank sends its message of parity p only after it has
// received every peer's previous message (of parity 1 - p), so a peer's next
// message of parity p cannot arrive before this rank has read its current
// one: two inboxes per peer are enough, and the caller keeps the parities
// alternating. The messages must say themselves what call they belong to
// (small_allreduce.cpp checks a header): a bound buffer accepts any message
// that fits.
//
// gloo sizes a pair's socket send buffer (SO_SNDBUF) for the first bound
// message it sends and for every longer one after it; the kernel stops
// tuning a buffer that was set. Sized for a 1 KB message, the buffer held
// less than one 64 KB ring segment, every segment then waited for the
// peer's delayed acknowledgement, and 256 KB allreduces took 30 ms
// instead of 0.7 ms. prime() therefore sends the longest message first,
// after which gloo leaves the buffer alone and the communicator sets it
// (communicator.cpp).
//
// Every message of a ddph build is at most `capacity` bytes, and every rank
// registers inboxes of that size; gloo aborts the process when a message is
// longer than the buffer it lands in, so capacity is a wire constant.
#pragma once

#include <gloo/context.h>
#include <gloo/transport/buffer.h>

#include <cstddef>
#include <memory>
#include <vector>

namespace ddph {
namespace comm_gloo {

class Mailboxes {
 public:
  // Registers the inboxes with every pair of context. Do it before any peer
  // can send to them (a message for a slot not registered yet makes gloo's
  // device thread spin until it is).
  Mailboxes(::gloo::Context& context, int rank, int world, size_t capacity);
  // Takes the pairs off gloo's device thread first (see mailboxes.cpp); the
  // context must outlive this.
  ~Mailboxes();
  Mailboxes(const Mailboxes&) = delete;
  Mailboxes& operator=(const Mailboxes&) = delete;

  size_t capacity() const { return capacity_; }
  // Exchanges one message of `capacity` bytes of parity 1 with every peer,
  // so that the first call (parity 0) follows a message of the other
  // parity. Call once, collectively, after every rank has registered its
  // inboxes. Its purpose is gloo's send buffer sizing (mailboxes.cpp).
  void prime();
  // This rank's next message of `parity` is written here; it may be
  // rewritten once every send of the previous one was awaited.
  char* outbox(int parity) { return box(rank_, parity); }
  // Sends the first `bytes` of outbox(parity) to peer's inbox.
  void send(int peer, int parity, size_t bytes);
  // Waits (within the pair's timeout) until the send has left this process.
  void wait_send(int peer, int parity);
  // Waits (within the pair's timeout) for peer's next message of `parity`
  // and returns where it is: valid until this rank sends its next message
  // of the other parity. The caller may overwrite it.
  char* receive(int peer, int parity);
  // Where peer's messages of `parity` land, without waiting: for a caller
  // that knows by their content that one arrived whole.
  char* inbox(int peer, int parity) { return box(peer, parity); }

 private:
  char* box(int owner, int parity) {
    return memory_.data() + (size_t(parity) * size_t(world_) + size_t(owner)) * capacity_;
  }
  size_t index(int peer, int parity) const {
    return size_t(parity) * size_t(world_) + size_t(peer);
  }

  ::gloo::Context& context_;
  int rank_, world_;
  size_t capacity_;
  std::vector<char> memory_;  // [parity][rank]: the inboxes, and this rank's outbox
  // [parity][peer]; null at this rank. Declared after memory_, so destroyed
  // before it.
  std::vector<std::unique_ptr<::gloo::transport::Buffer>> sends_, inboxes_;
};

}  // namespace comm_gloo
}  // namespace ddph
