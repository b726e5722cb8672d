// Sub-communicators for hooks that reduce inside groups of ranks (local SGD
// within a machine, hierarchical model averaging).
//
// Every rank learns every rank's (color, key) with one allgather, so all
// agree on the groups without asking the store. Each group then connects a
// fresh full mesh under its own store namespace: the parent's prefix, the
// split's sequence number (split is collective, so it counts alike on every
// rank) and the color.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "plugins/comm_gloo/communicator.h"

namespace ddph {
namespace comm_gloo {

std::unique_ptr<CommBackend> Communicator::split(int color, int key) {
  const uint32_t seq = splits_++;
  const size_t world = size_t(size());
  std::vector<int64_t> mine = {color, key}, all(2 * world);
  int64_t two = 2, many = int64_t(all.size());
  DLTensor send{mine.data(), {kDLCPU, 0}, 1, {kDLInt, 64, 1}, &two, nullptr, 0};
  DLTensor recv{all.data(), {kDLCPU, 0}, 1, {kDLInt, 64, 1}, &many, nullptr, 0};
  allgather(&send, &recv, nullptr);
  if (color < 0) return nullptr;

  std::vector<int> members;  // ranks of this color, in (key, rank) order
  for (size_t r = 0; r < world; ++r)
    if (all[2 * r] == color) members.push_back(int(r));
  std::stable_sort(members.begin(), members.end(),
                   [&](int a, int b) { return all[2 * size_t(a) + 1] < all[2 * size_t(b) + 1]; });
  CommConfig sub = config_;
  sub.rank = int(std::find(members.begin(), members.end(), rank()) - members.begin());
  sub.world = int(members.size());
  sub.world_ranks.clear();
  for (int m : members) sub.world_ranks.push_back(world_rank(m));
  sub.prefix = config_.prefix + "/split" + std::to_string(seq) + "/color" + std::to_string(color);
  return std::make_unique<Communicator>(sub, store_, wire_);
}

}  // namespace comm_gloo
}  // namespace ddph
