// allreduce of a small buffer as one exchange instead of a ring.
//
// The ring (ring_allreduce.cpp) cuts even 1 KB into two segments per rank:
// 2 (W - 1) * 2 messages that depend on each other, each a handshake
// through gloo's device threads, about 0.7 ms for 1 KB at two ranks on a
// 2-core machine. Up to small_allreduce_limit, every rank instead sends its
// whole buffer to every peer's mailbox (one write each, mailboxes.h), waits
// for theirs, and combines the W buffers itself in exactly the order the
// ring would: segment by segment, chunk c carried from rank c - 1 down to
// rank c, each rank on the way computing "its own values op what arrived".
// The result is bit-identical to the ring, and so to gloo::allreduce, on
// every rank, for every op and dtype, AVG's divide-first numerics included:
// each rank divides its own buffer before sending it, as the ring divides
// each local segment before its first use.
//
// It sends (W - 1) times the buffer where the ring sends 2 (W - 1) / W of
// it: the same at two ranks, which is why it stops at a small size.
//
// A mailbox takes any message that fits, so each message starts with a
// header of what both ends must agree on (the call's sequence number, the
// collective, its length, dtype and op): ranks making different calls fail
// at once with DDPH_COMM_FAILURE naming both calls. A rank making a small
// allreduce while its peer runs the ring or another collective waits in
// vain, like every other disagreement here: the first to give up times out.
#include "plugins/comm_gloo/small_allreduce.h"

#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "core/comm/call_agreement.h"
#include "core/kernels/divide.h"
#include "core/kernels/reduce.h"
#include "plugins/comm_gloo/communicator.h"
#include "plugins/comm_gloo/ring_layout.h"

namespace ddph {
namespace comm_gloo {
namespace {

// The first kSmallHeaderBytes of every mailbox message.
struct Header {
  char magic[8];   // kMagic: a message of this protocol
  uint64_t tag;    // the call's sequence number on this communicator
  uint64_t bytes;  // of the values that follow
  uint32_t dtype;  // ddph::DType
  uint32_t op;     // ddph_reduce_op_t
  char what[16];   // the collective, NUL-padded
};
static_assert(sizeof(Header) == kSmallHeaderBytes, "the header is a wire format");
constexpr char kMagic[8] = {'d', 'd', 'p', 'h', 's', 'm', 'a', '1'};

// The last 8 bytes of a message: a value of its tag that the values before
// it are very unlikely to hold by chance (splitmix64's finalizer).
uint64_t seal_of(uint64_t tag) {
  uint64_t z = tag + 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Whether the mailbox `box` holds the whole message of call `tag`: the
// header came first and the seal last.
bool arrived_whole(const char* box, size_t capacity, uint64_t tag) {
  Header h;
  std::memcpy(&h, box, sizeof h);
  if (std::memcmp(h.magic, kMagic, sizeof kMagic) != 0 || h.tag != tag ||
      h.bytes > capacity - sizeof h - kSmallSealBytes)
    return false;
  uint64_t seal;
  std::memcpy(&seal, box + sizeof h + h.bytes, sizeof seal);
  return seal == seal_of(tag);
}

Header header_of(const char* what, uint64_t tag, const CommBuf& buf, ddph_reduce_op_t op) {
  Header h{};
  std::memcpy(h.magic, kMagic, sizeof kMagic);
  h.tag = tag;
  h.bytes = buf.bytes();
  h.dtype = uint32_t(buf.dtype);
  h.op = uint32_t(op);
  std::strncpy(h.what, what, sizeof h.what - 1);
  return h;
}

// "call 7 is allreduce of 4000 bytes of float32 with SUM"
std::string call_text(const Header& h) {
  std::ostringstream os;
  os << "call " << h.tag << " is " << std::string(h.what, strnlen(h.what, sizeof h.what)) << " of "
     << h.bytes << " bytes of ";
  if (h.dtype <= uint32_t(DType::U8))
    os << dtype_name(DType(h.dtype));
  else
    os << "dtype " << h.dtype;
  os << " with " << reduce_op_name(h.op);
  return os.str();
}

}  // namespace

void Communicator::allreduce_any(const char* what, const CommBuf& send, const CommBuf& recv,
                                 ddph_reduce_op_t op) {
  if (mailboxes_ && recv.bytes() <= small_allreduce_limit(size()))
    small_allreduce(what, send, recv, op);
  else
    ring_allreduce(what, send, recv, op);
}

void Communicator::small_allreduce(const char* what, const CommBuf& send, const CommBuf& recv,
                                   ddph_reduce_op_t op) {
  const int world = size(), me = rank();
  const size_t es = dtype_size(recv.dtype), bytes = recv.bytes();
  char* data = static_cast<char*>(recv.data);
  if (send.data != recv.data) std::memcpy(data, send.data, bytes);
  if (op == DDPH_AVG) divide_inplace(recv.dtype, data, recv.numel, world);

  const int parity = int(small_calls_++ % 2);
  const Header mine = header_of(what, next_tag(), recv, op);
  char* out = mailboxes_->outbox(parity);
  std::memcpy(out, &mine, sizeof mine);
  std::memcpy(out + sizeof mine, data, bytes);
  std::vector<char*> arrived(size_t(world), nullptr);
  const uint64_t seal = seal_of(mine.tag);
  std::memcpy(out + sizeof mine + bytes, &seal, sizeof seal);
  run(what, [&] {
    for (int k = 1; k < world; ++k)
      mailboxes_->send((me + k) % world, parity, sizeof mine + bytes + sizeof seal);
    // A peer that has its result may close before this rank waits for the
    // message it sent: gloo then fails the wait (it checks the pair's error
    // before the completion), although the message is here. A message whose
    // header and seal carry this call's tag arrived whole (TCP delivers in
    // order), and is used.
    for (int k = 1; k < world; ++k) {
      const int from = (me - k + world) % world;
      try {
        awaiting(true, {from});
        arrived[size_t(from)] = mailboxes_->receive(from, parity);
      } catch (...) {
        char* box = mailboxes_->inbox(from, parity);
        if (!arrived_whole(box, mailboxes_->capacity(), mine.tag)) throw;
        arrived[size_t(from)] = box;
      }
    }
    // Every message is here, so this rank's result is right. A send that
    // gloo reports failed went to a peer that closed: one that received it
    // and finished, or one that died and will not need it.
    for (int k = 1; k < world; ++k) {
      try {
        mailboxes_->wait_send((me + k) % world, parity);
      } catch (...) {
      }
    }
  });
  for (int peer = 0; peer < world; ++peer) {
    if (peer == me || std::memcmp(arrived[size_t(peer)], &mine, sizeof mine) == 0) continue;
    Header theirs;
    std::memcpy(&theirs, arrived[size_t(peer)], sizeof theirs);
    const PeerIdentity& who = peers_[size_t(peer)];
    std::ostringstream os;
    os << what << " on rank " << me << ": rank " << peer << " (pid " << who.pid << " on host "
       << who.host << ") is making a different call: ";
    if (std::memcmp(theirs.magic, kMagic, sizeof kMagic) != 0)
      os << "it sent a message this version of ddphooks cannot read; this rank's "
         << call_text(mine);
    else
      os << "its " << call_text(theirs) << "; this rank's " << call_text(mine);
    const Error e(DDPH_COMM_FAILURE, os.str());
    break_with(e);
    throw e;
  }

  auto values_of = [&](int r, size_t first) {
    return (r == me ? data : arrived[size_t(r)] + sizeof mine) + first * es;
  };
  const ddph_reduce_op_t combine = op == DDPH_AVG ? DDPH_SUM : op;
  const RingLayout layout(recv.numel, world, es);
  for (int c = 0; c < world; ++c) {
    for (size_t j = 0; j < layout.per_chunk(); ++j) {
      const auto r = layout.segment(size_t(c), j);
      const size_t n = r.second - r.first;
      if (n == 0) continue;
      // x_c op (x_c+1 op (... op (x_c-2 op x_c-1))), combined in place in
      // the buffers of the ranks on the way (each is read once, here).
      const char* carried = values_of(wrap_rank(c - 1, world), r.first);
      for (int k = 2; k <= world; ++k) {
        char* own = values_of(wrap_rank(c - k, world), r.first);
        reduce_into(combine, recv.dtype, own, own, carried, n);
        carried = own;
      }
      if (c != me) std::memcpy(data + r.first * es, carried, n * es);
    }
  }
}

}  // namespace comm_gloo
}  // namespace ddph
