// The collectives of ddph_comm_t on gloo. Each checks its arguments fully
// before touching the network, so misuse never breaks the communicator.
#include <gloo/context.h>
#include <gloo/transport/unbound_buffer.h>

#include <cstring>
#include <vector>

#include "core/comm/args.h"
#include "plugins/comm_gloo/communicator.h"
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

void Communicator::drain_sends(const char* what) {
  if (pending_sends_.empty()) return;
  run(what, [&] {
    while (!pending_sends_.empty()) {
      PendingSend& s = *pending_sends_.front();
      DDPH_CHECK(s.buffer->waitSend(config_.timeout), DDPH_COMM_FAILURE,
                 "an earlier send to peer " << s.peer << " was aborted");
      pending_sends_.pop_front();
    }
  });
}

void Communicator::allreduce(const DLTensor* send_t, DLTensor* recv_t, ddph_reduce_op_t op,
                             void* /*stream: host memory only*/) {
  const char* what = "allreduce";
  check_op(op, what);
  CommBuf send = check_comm_tensor(send_t, what, "send", "gloo", CommMemory::kHost);
  CommBuf recv = check_comm_tensor(recv_t, what, "recv", "gloo", CommMemory::kHost);
  check_same_dtype(send, recv, what);
  check_numel(recv, send.numel, what, "recv", "recv has send's numel");
  check_allreduce_buffers(send, recv, what);
  drain_sends(what);
  check_not_broken(what);
  if (send.numel == 0) return;
  allreduce_any(what, send, recv, op);
}

void Communicator::reduce_scatter(const DLTensor* send_t, DLTensor* recv_t, ddph_reduce_op_t op,
                                  void* /*stream*/) {
  const char* what = "reduce_scatter";
  check_op(op, what);
  CommBuf send = check_comm_tensor(send_t, what, "send", "gloo", CommMemory::kHost);
  CommBuf recv = check_comm_tensor(recv_t, what, "recv", "gloo", CommMemory::kHost);
  check_same_dtype(send, recv, what);
  check_numel(send, size_t(size()) * recv.numel, what, "send", "size() * recv numel");
  drain_sends(what);
  check_not_broken(what);
  if (recv.numel == 0) return;
  // A full allreduce into scratch, then this rank keeps its block. It moves
  // twice the bytes of a true reduce-scatter, but the ring's chunks (gloo's
  // segment geometry) do not line up with the ranks' blocks. Scratch also
  // makes any aliasing of send and recv harmless.
  std::vector<char> scratch(send.bytes());
  std::memcpy(scratch.data(), send.data, send.bytes());
  CommBuf whole = send;
  whole.data = scratch.data();
  allreduce_any(what, whole, whole, op);
  std::memcpy(recv.data, scratch.data() + size_t(rank()) * recv.bytes(), recv.bytes());
}

void Communicator::send(const DLTensor* buf_t, int peer, void* /*stream*/) {
  const char* what = "send";
  CommBuf buf = check_comm_tensor(buf_t, what, "buf", "gloo", CommMemory::kHost);
  check_peer(peer, rank(), size(), what);
  check_not_broken(what);
  if (buf.numel == 0) return;
  if (pending_sends_.size() >= kMaxPendingSends) {
    // Wait for the oldest only: that keeps the order and bounds memory.
    run(what, [&] {
      PendingSend& s = *pending_sends_.front();
      DDPH_CHECK(s.buffer->waitSend(config_.timeout), DDPH_COMM_FAILURE,
                 "an earlier send to peer " << s.peer << " was aborted");
      pending_sends_.pop_front();
    });
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
  CommBuf buf = check_comm_tensor(buf_t, what, "buf", "gloo", CommMemory::kHost);
  check_peer(peer, rank(), size(), what);
  check_not_broken(what);
  if (buf.numel == 0) return;
  const uint64_t slot = p2p_slot(peer, recv_seq_[size_t(peer)]++, buf.bytes());
  run(what, [&](PostedBuffers& posted) {
    auto* ub = &posted.buffer(buf.data, buf.bytes());
    ub->recv(peer, slot);
    DDPH_CHECK(ub->waitRecv(config_.timeout), DDPH_COMM_FAILURE,
               "recv from peer " << peer << " was aborted");
  });
}

}  // namespace comm_gloo
}  // namespace ddph
