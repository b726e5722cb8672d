// Collectives where every rank trades one block with every other rank at
// once: allgather and alltoallv.
//
// gloo delivers an unbound-buffer message only after the receiver has
// posted its recv, so each message costs a notify-then-send round trip.
// gloo's ring allgather pays W - 1 of them back to back, and a send/recv
// loop pays one per step; posting every receive, then every send, and only
// then waiting pays about one. Every rank still sends each byte once per
// peer, as in the ring, so the bytes on the wire are the same.
#include <gloo/context.h>
#include <gloo/transport/unbound_buffer.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "plugins/comm_gloo/communicator.h"
#include "plugins/comm_gloo/slots.h"

namespace ddph {
namespace comm_gloo {

void Communicator::exchange(const char* what, const CommBuf& in, const std::vector<Span>& sends,
                            const CommBuf& out, const std::vector<Span>& recvs) {
  const int world = size(), me = rank();
  const uint64_t tag = next_tag();
  // Each message's own length goes into its slot (slots.h): alltoallv's
  // counts are the callers' promise, and a broken one must not abort us.
  auto slot_for = [&](size_t bytes) {
    return comm_gloo::slot(kExchangeSlot, agreement({name_code(what), bytes, uint64_t(in.dtype)}),
                           tag);
  };
  run(what, [&](PostedBuffers& posted) {
    auto* in_buf = &posted.buffer(in.data, in.bytes());
    auto* out_buf = &posted.buffer(out.data, out.bytes());
    std::vector<int> from_peers, to_peers;
    // Receives first, so that peers' sends find them posted.
    for (int k = 1; k < world; ++k) {
      const int from = (me - k + world) % world;
      const Span& r = recvs[size_t(from)];
      if (r.bytes == 0) continue;
      out_buf->recv(from, slot_for(r.bytes), r.offset, r.bytes);
      from_peers.push_back(from);
    }
    for (int k = 1; k < world; ++k) {
      const int to = (me + k) % world;
      const Span& s = sends[size_t(to)];
      if (s.bytes == 0) continue;
      in_buf->send(to, slot_for(s.bytes), s.offset, s.bytes);
      to_peers.push_back(to);
    }
    await_peers(*out_buf, true, std::move(from_peers), what, "a receive");
    await_peers(*in_buf, false, std::move(to_peers), what, "a send");
  });
}

void Communicator::await_peers(::gloo::transport::UnboundBuffer& ub, bool recv,
                               std::vector<int> peers, const char* what, const char* failure) {
  while (!peers.empty()) {
    awaiting(recv, peers);
    int done = -1;
    const bool ok =
        recv ? ub.waitRecv(&done, config_.timeout) : ub.waitSend(&done, config_.timeout);
    DDPH_CHECK(ok, DDPH_COMM_FAILURE, what << ": " << failure << " was aborted");
    const auto it = std::find(peers.begin(), peers.end(), done);
    peers.erase(it != peers.end() ? it : peers.begin());
  }
}

void Communicator::allgather(const DLTensor* send_t, DLTensor* recv_t, void* /*stream*/) {
  const char* what = "allgather";
  const auto [send, recv] = check_allgather_args(send_t, recv_t, size(), kReach);
  const bool in_place = check_allgather_buffers(send, recv, rank(), what);
  char* own = static_cast<char*>(recv.data) + size_t(rank()) * send.bytes();
  drain_sends(what);
  check_not_broken(what);
  if (send.numel == 0) return;
  if (!in_place) std::memcpy(own, send.data, send.bytes());
  const size_t block = send.bytes();
  std::vector<Span> sends(size_t(size()), Span{size_t(rank()) * block, block});
  std::vector<Span> recvs(static_cast<size_t>(size()));
  for (size_t p = 0; p < recvs.size(); ++p) recvs[p] = Span{p * block, block};
  exchange(what, recv, sends, recv, recvs);
}

void Communicator::alltoallv(const DLTensor* send_t, const int64_t* send_counts, DLTensor* recv_t,
                             const int64_t* recv_counts, void* /*stream*/) {
  const char* what = "alltoallv";
  const auto [send, recv] =
      check_alltoallv_args(send_t, send_counts, recv_t, recv_counts, rank(), size(), kReach);
  const size_t world = size_t(size()), me = size_t(rank()), es = dtype_size(send.dtype);
  std::vector<Span> sends(world), recvs(world);
  size_t send_total = 0, recv_total = 0;
  for (size_t p = 0; p < world; ++p) {
    sends[p] = Span{send_total * es, size_t(send_counts[p]) * es};
    recvs[p] = Span{recv_total * es, size_t(recv_counts[p]) * es};
    send_total += size_t(send_counts[p]);
    recv_total += size_t(recv_counts[p]);
  }
  drain_sends(what);
  check_not_broken(what);
  std::memcpy(static_cast<char*>(recv.data) + recvs[me].offset,
              static_cast<const char*>(send.data) + sends[me].offset, sends[me].bytes);
  sends[me] = recvs[me] = Span{0, 0};
  exchange(what, send, sends, recv, recvs);
}

}  // namespace comm_gloo
}  // namespace ddph
