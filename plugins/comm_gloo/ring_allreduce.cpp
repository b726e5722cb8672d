// allreduce as one ring over gloo's own point-to-point buffers, for every
// op. The ring's buffers belong to Communicator::run, so a peer dying
// mid-ring never frees memory gloo's device thread may still write into
// (posted_buffers.h); gloo::allreduce frees its own buffers as it unwinds.
//
// The ring copies gloo::allreduce's geometry and direction (its segment size,
// chunk boundaries, data flowing to rank - 1, rank c finishing chunk c), so
// every element is combined in the same order as gloo's ring combines it:
// the result is bit-identical to gloo::allreduce for any world size.
//
// DDPH_AVG has PyTorch's divide-first numerics (allreduce_hook divides each
// rank's gradient by the world size, then sums, as on Gloo). A divide pass
// before the ring would read and write the whole bucket from memory while
// the peer streams too, and cost 15-20% of a 25 MB loopback allreduce. So
// every local segment is divided when the ring first touches it (just before
// it is first sent, or just before a neighbour's partial sum is added to
// it), while it is in cache.
//
// Reduce-scatter: at step s, rank r sends chunk (r + 1 + s) to r - 1 and
// combines chunk (r + 2 + s), received from r + 1, into its own, so after
// world - 1 steps it holds the result of chunk r. Allgather: at step s it
// sends chunk (r + s) and receives chunk (r + 1 + s). Steps are pipelined
// segment by segment, with two receive buffers.
#include <gloo/context.h>
#include <gloo/transport/unbound_buffer.h>

#include <cstring>
#include <deque>
#include <utility>

#include "core/kernels/divide.h"
#include "core/kernels/reduce.h"
#include "plugins/comm_gloo/communicator.h"
#include "plugins/comm_gloo/ring_layout.h"
#include "plugins/comm_gloo/slots.h"

namespace ddph {
namespace comm_gloo {
namespace {

constexpr size_t kSendsInFlight = 2;

}  // namespace

void Communicator::ring_allreduce(const char* what, const CommBuf& send, const CommBuf& recv,
                                  ddph_reduce_op_t op) {
  if (send.data != recv.data) std::memcpy(recv.data, send.data, recv.bytes());
  if (size() == 1) return;  // x / 1 == x, and any op of one value is that value
  ring(what, recv, op, RingLayout(recv.numel, size(), dtype_size(recv.dtype)), true);
}

void Communicator::ring(const char* what, const CommBuf& recv, ddph_reduce_op_t op,
                        const RingLayout& layout, bool gather) {
  const int world = size(), me = rank();
  const size_t es = dtype_size(recv.dtype);
  char* data = static_cast<char*>(recv.data);
  const bool average = op == DDPH_AVG;
  const ddph_reduce_op_t combine = average ? DDPH_SUM : op;
  const int to = (me + world - 1) % world, from = (me + 1) % world;
  const uint64_t slot = comm_gloo::slot(
      kRingSlot,
      agreement({name_code(what), recv.bytes(), uint64_t(recv.dtype), uint64_t(op), gather}),
      next_tag());
  auto divide = [&](std::pair<size_t, size_t> r) {
    if (average) divide_inplace(recv.dtype, data + r.first * es, r.second - r.first, world);
  };
  run(what, [&](PostedBuffers& posted) {
    auto* buf = &posted.buffer(data, recv.bytes());
    const size_t tmp_bytes = 2 * layout.segment_elems() * es;
    char* tmp_mem = posted.scratch(tmp_bytes);
    auto* tmp = &posted.buffer(tmp_mem, tmp_bytes);
    size_t sends_posted = 0, sends_done = 0;
    auto wait_send = [&] {
      awaiting(false, {to});
      DDPH_CHECK(buf->waitSend(config_.timeout), DDPH_COMM_FAILURE,
                 what << ": a send to rank " << to << " was aborted");
      ++sends_done;
    };
    auto post_send = [&](std::pair<size_t, size_t> r) {
      if (r.second <= r.first) return;
      buf->send(to, slot, r.first * es, (r.second - r.first) * es);
      ++sends_posted;
      while (sends_posted - sends_done > kSendsInFlight) wait_send();
    };
    const size_t steps = layout.steps();
    const size_t tmp_slot_bytes = layout.segment_elems() * es;

    // Reduce-scatter.
    auto rs_recv = [&](size_t t) { return layout.at(me + 2, t); };
    auto rs_send = [&](size_t t) { return layout.at(me + 1, t); };
    auto post_rs_recv = [&](size_t t) {
      auto r = rs_recv(t);
      if (r.second > r.first)
        tmp->recv(from, slot, (t % 2) * tmp_slot_bytes, (r.second - r.first) * es);
    };
    auto post_rs_send = [&](size_t t) {
      auto r = rs_send(t);
      if (t < layout.per_chunk() && r.second > r.first)
        divide(r);  // our own chunk, untouched so far
      post_send(r);
    };
    post_rs_recv(0);
    post_rs_send(0);
    for (size_t t = 0; t < steps; ++t) {
      if (t + 1 < steps) {
        post_rs_recv(t + 1);  // into the other receive buffer
        // Segment t + 1 is ready before segment t is reduced: it is either
        // our own chunk or one reduced at step t + 1 - per_chunk <= t - 1
        // (the layout has at least two segments per chunk).
        post_rs_send(t + 1);
      }
      auto r = rs_recv(t);
      if (r.second > r.first) {
        awaiting(true, {from});
        DDPH_CHECK(tmp->waitRecv(config_.timeout), DDPH_COMM_FAILURE,
                   what << ": a receive from rank " << from << " was aborted");
        divide(r);  // the first touch of this local segment
        char* seg = data + r.first * es;
        reduce_into(combine, recv.dtype, seg, seg, tmp_mem + (t % 2) * tmp_slot_bytes,
                    r.second - r.first);
      }
    }
    // The allgather overwrites chunks that were sent from above.
    while (sends_done < sends_posted) wait_send();
    if (!gather) return;

    // Allgather, straight into the buffer.
    std::deque<size_t> recvs_pending;  // steps with a posted receive, in order
    for (size_t t = 0; t < steps; ++t) {
      auto r = layout.at(me + 1, t);  // chunk (me + 1 + s): what `from` sends at this step
      if (r.second > r.first) {
        buf->recv(from, slot, r.first * es, (r.second - r.first) * es);
        recvs_pending.push_back(t);
      }
      // We forward at step t what arrived at step t - per_chunk.
      while (!recvs_pending.empty() && t >= layout.per_chunk() &&
             recvs_pending.front() <= t - layout.per_chunk()) {
        awaiting(true, {from});
        DDPH_CHECK(buf->waitRecv(config_.timeout), DDPH_COMM_FAILURE,
                   what << ": a receive from rank " << from << " was aborted");
        recvs_pending.pop_front();
      }
      post_send(layout.at(me, t));
    }
    for (; !recvs_pending.empty(); recvs_pending.pop_front()) {
      awaiting(true, {from});
      DDPH_CHECK(buf->waitRecv(config_.timeout), DDPH_COMM_FAILURE,
                 what << ": a receive from rank " << from << " was aborted");
    }
    while (sends_done < sends_posted) wait_send();
  });
}

}  // namespace comm_gloo
}  // namespace ddph
