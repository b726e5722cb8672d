// broadcast as a binomial tree (gloo::broadcast's shape: O(log W) rounds,
// every rank receives once, then forwards), over buffers that
// Communicator::run owns, so a peer dying mid-tree never frees memory that
// gloo's device thread may still write into (posted_buffers.h).
#include <gloo/context.h>
#include <gloo/transport/unbound_buffer.h>

#include <algorithm>

#include "core/comm/args.h"
#include "plugins/comm_gloo/communicator.h"
#include "plugins/comm_gloo/slots.h"

namespace ddph {
namespace comm_gloo {

void Communicator::broadcast(DLTensor* buf_t, int root, void* /*stream*/) {
  const char* what = "broadcast";
  const CommBuf buf = check_comm_tensor(buf_t, what, "buf", kReach);
  check_root(root, size(), what);
  drain_sends(what);
  check_not_broken(what);
  const int world = size();
  if (buf.numel == 0 || world == 1) return;
  const uint64_t slot = comm_gloo::slot(
      kBroadcastSlot,
      agreement({name_code(what), buf.bytes(), uint64_t(buf.dtype), uint64_t(root)}), next_tag());
  // Ranks relative to the root, so the root is 0 and the tree is the same
  // for every root.
  const int relative = (rank() - root + world) % world;
  auto absolute = [&](int rel) { return (rel + root) % world; };
  run(what, [&](PostedBuffers& posted) {
    auto* ub = &posted.buffer(buf.data, buf.bytes());
    // The parent clears this rank's lowest set bit.
    int mask = 1;
    for (; mask < world; mask <<= 1) {
      if (relative & mask) {
        const int parent = absolute(relative - mask);
        ub->recv(parent, slot);
        awaiting(true, {parent});
        DDPH_CHECK(ub->waitRecv(config_.timeout), DDPH_COMM_FAILURE,
                   what << ": the receive from rank " << parent << " was aborted");
        break;
      }
    }
    // The children set one bit below it.
    std::vector<int> children;
    for (mask >>= 1; mask > 0; mask >>= 1) {
      if (relative + mask >= world) continue;
      ub->send(absolute(relative + mask), slot);
      children.push_back(absolute(relative + mask));
    }
    await_peers(*ub, false, std::move(children), what, "a send to a child in the tree");
  });
}

}  // namespace comm_gloo
}  // namespace ddph
