// The collectives of ddph_comm_t on gloo. Each checks its arguments fully
// before touching the network, so misuse never breaks the communicator.
#include <gloo/context.h>
#include <gloo/transport/unbound_buffer.h>

#include <cstring>
#include <vector>

#include "core/comm/args.h"
#include "plugins/comm_gloo/communicator.h"
#include "plugins/comm_gloo/ring_layout.h"
#include "plugins/comm_gloo/slots.h"

namespace ddph {
namespace comm_gloo {
namespace {

// Point-to-point slots count each direction of a pair on its own, and carry
// the message's length (slots.h): a recv into a shorter buffer than the
// send must time out, not abort the process.
uint64_t p2p_slot(int sender, uint64_t seq, size_t bytes) {
  return slot(kP2PSlot, agreement({name_code("p2p"), uint64_t(sender), bytes}), seq);
}

// Bounds the memory held by buffered sends nobody has received yet.
constexpr size_t kMaxPendingSends = 64;

}  // namespace

void Communicator::wait_oldest_send() {
  PendingSend& s = *pending_sends_.front();
  awaiting(false, {s.peer});
  DDPH_CHECK(s.buffer->waitSend(config_.timeout), DDPH_COMM_FAILURE,
             "an earlier send to peer " << s.peer << " was aborted");
  pending_sends_.pop_front();
}

void Communicator::drain_sends(const char* what) {
  if (pending_sends_.empty()) return;
  run(what, [&] {
    while (!pending_sends_.empty()) wait_oldest_send();
  });
}

void Communicator::allreduce(const DLTensor* send_t, DLTensor* recv_t, ddph_reduce_op_t op,
                             void* /*stream: host memory only*/) {
  const char* what = "allreduce";
  const auto [send, recv] = check_allreduce_args(send_t, recv_t, op, kReach);
  check_allreduce_buffers(send, recv, what);
  drain_sends(what);
  check_not_broken(what);
  if (send.numel == 0) return;
  allreduce_any(what, send, recv, op);
}

void Communicator::reduce_scatter(const DLTensor* send_t, DLTensor* recv_t, ddph_reduce_op_t op,
                                  void* /*stream*/) {
  const char* what = "reduce_scatter";
  const auto [send, recv] = check_reduce_scatter_args(send_t, recv_t, op, size(), kReach);
  drain_sends(what);
  check_not_broken(what);
  if (recv.numel == 0) return;
  const bool small = mailboxes_ && send.bytes() <= small_allreduce_limit(size());
  // In place (recv is block rank() of send, ddph.h), the ring combines
  // straight into send, whose other blocks the caller gave up.
  const bool in_place = recv.data == static_cast<char*>(send.data) + size_t(rank()) * recv.bytes();
  if (in_place && !small) {
    if (size() > 1)
      ring(what, send, op, RingLayout::blocks(send.numel, size(), dtype_size(send.dtype)), false);
    return;
  }
  // Otherwise in scratch, which the reduction combines into and which makes
  // any other aliasing of send and recv harmless. Kept from call to call: a
  // fresh buffer would be zeroed and faulted in
  // page by page each time, which cost a third of a 100 MB reduce-scatter.
  if (reduce_scatter_scratch_.size() < send.bytes()) reduce_scatter_scratch_.resize(send.bytes());
  char* scratch = reduce_scatter_scratch_.data();
  std::memcpy(scratch, send.data, send.bytes());
  CommBuf whole = send;
  whole.data = scratch;
  if (small) {
    // A small buffer: one exchange of whole buffers (small_allreduce.cpp),
    // whose messages name the call, so ranks making another call fail at
    // once; its few extra bytes do not matter.
    allreduce_any(what, whole, whole, op);
  } else if (size() > 1) {
    // The allreduce ring's first half over the ranks' blocks (chunk c is
    // block c): (world - 1) / world of the buffer on the wire, as a
    // reduce-scatter should send, every element combined in ring order
    // with DDPH_AVG's divide-first numerics.
    ring(what, whole, op, RingLayout::blocks(whole.numel, size(), dtype_size(whole.dtype)), false);
  }
  std::memcpy(recv.data, scratch + size_t(rank()) * recv.bytes(), recv.bytes());
}

void Communicator::send(const DLTensor* buf_t, int peer, void* /*stream*/) {
  const char* what = "send";
  const CommBuf buf = check_p2p_args(buf_t, peer, rank(), size(), what, kReach);
  check_not_broken(what);
  if (buf.numel == 0) return;
  if (pending_sends_.size() >= kMaxPendingSends) {
    // Wait for the oldest only: that keeps the order and bounds memory.
    run(what, [&] { wait_oldest_send(); });
  }
  const uint64_t slot = p2p_slot(rank(), send_seq_[size_t(peer)]++, buf.bytes());
  auto pending = std::make_unique<PendingSend>();
  const char* bytes = static_cast<const char*>(buf.data);
  pending->data.assign(bytes, bytes + buf.bytes());
  pending->peer = peer;
  run(what, [&] {
    pending->buffer = context_->createUnboundBuffer(pending->data.data(), pending->data.size());
    pending->buffer->send(peer, slot);
  });
  pending_sends_.push_back(std::move(pending));
}

void Communicator::recv(DLTensor* buf_t, int peer, void* /*stream*/) {
  const char* what = "recv";
  const CommBuf buf = check_p2p_args(buf_t, peer, rank(), size(), what, kReach);
  check_not_broken(what);
  if (buf.numel == 0) return;
  const uint64_t slot = p2p_slot(peer, recv_seq_[size_t(peer)]++, buf.bytes());
  run(what, [&](PostedBuffers& posted) {
    auto* ub = &posted.buffer(buf.data, buf.bytes());
    ub->recv(peer, slot);
    awaiting(true, {peer});
    DDPH_CHECK(ub->waitRecv(config_.timeout), DDPH_COMM_FAILURE,
               "recv from peer " << peer << " was aborted");
  });
}

}  // namespace comm_gloo
}  // namespace ddph
