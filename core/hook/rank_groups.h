// Which ranks reduce together, for hooks that work inside groups of ranks
// (post_localsgd's subgroups, hierarchical's machines). Each function
// returns the group of every rank as a "color": ranks with the same color
// form one group, and colors are the smallest rank of their group, so every
// rank computes the same answer from the same inputs.
#pragma once

#include <ddph/ddph.h>

#include <string>
#include <vector>

namespace ddph {

// Consecutive ranks, `size` to a group (PyTorch's dist.new_subgroups):
// [0, size), [size, 2 size), ... `size` must divide `world`; `hook` names the
// caller in the error.
std::vector<int> groups_of_size(int world, int size, const char* hook);

// An explicit list, "0,1;2,3": groups separated by ';', ranks by ','. Every
// rank in [0, world) must appear exactly once.
std::vector<int> groups_from_list(const std::string& list, int world, const char* hook);

// Ranks whose host names are equal (the ranks of one machine).
std::vector<int> groups_by_host(const std::vector<std::string>& hosts);

// This rank's host name (DDPH_HOSTNAME overrides it, for containers whose
// host names mean nothing, and for tests), gathered from every rank of
// world. Collective over world.
std::vector<std::string> all_host_names(ddph_comm_t* world);

}  // namespace ddph
