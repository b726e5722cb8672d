// Which ranks share a machine: every machine must hold the same number of
// ranks, so that the mean over the machines' means is the mean over the world.
#pragma once

#include <ddph/ddph.h>

#include <cstdint>
#include <vector>

namespace ddph {
namespace hierarchical {

struct Machines {
  std::vector<int> colors;  // per rank: the smallest rank of its machine (its leader)
  int local_size = 1;       // ranks per machine
  int count = 1;            // machines
};

// local_size > 0: consecutive ranks, local_size to a machine (it must
// divide the world size). local_size == -1: the ranks that share a host name
// (DDPH_HOSTNAME overrides it); collective over world. Anything else, or
// machines of different sizes, is a DDPH_INVALID_ARGUMENT naming the problem.
Machines find_machines(ddph_comm_t* world, int64_t local_size, const char* hook);

}  // namespace hierarchical
}  // namespace ddph
