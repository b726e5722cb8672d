// barrier as a dissemination barrier: in round i every rank signals the rank
// 2^i after it and waits for the rank 2^i before it, so after ceil(log2 W)
// rounds each rank has heard, directly or not, from every other. The
// one-byte buffers belong to Communicator::run, so a peer dying mid-barrier
// never frees memory gloo's device thread may still write into
// (posted_buffers.h).
#include <gloo/context.h>
#include <gloo/transport/unbound_buffer.h>

#include <vector>

#include "plugins/comm_gloo/communicator.h"
#include "plugins/comm_gloo/slots.h"

namespace ddph {
namespace comm_gloo {

void Communicator::barrier() {
  const char* what = "barrier";
  drain_sends(what);
  check_not_broken(what);
  const int world = size(), me = rank();
  if (world == 1) return;
  const uint64_t slot = comm_gloo::slot(kBarrierSlot, agreement({name_code(what)}), next_tag());
  run(what, [&](PostedBuffers& posted) {
    std::vector<::gloo::transport::UnboundBuffer*> signals;
    std::vector<int> to;
    for (int distance = 1; distance < world; distance <<= 1) {
      char* tokens = posted.scratch(2);
      auto* in = &posted.buffer(tokens, 1);
      auto* out = &posted.buffer(tokens + 1, 1);
      const int from = (me - distance + world) % world;
      in->recv(from, slot);
      out->send((me + distance) % world, slot);
      signals.push_back(out);
      to.push_back((me + distance) % world);
      awaiting(true, {from});
      DDPH_CHECK(in->waitRecv(config_.timeout), DDPH_COMM_FAILURE,
                 what << ": the signal from rank " << from << " was aborted");
    }
    for (size_t i = 0; i < signals.size(); ++i) {
      awaiting(false, {to[i]});
      DDPH_CHECK(signals[i]->waitSend(config_.timeout), DDPH_COMM_FAILURE,
                 what << ": a signal to a peer was aborted");
    }
  });
}

}  // namespace comm_gloo
}  // namespace ddph
