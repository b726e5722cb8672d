#include "loader/tool/bench_machines.h"

#include <cstdlib>
#include <string>

namespace ddph_tool {
namespace {

int machine_of(int rank, int world, int machines) {
  return rank / (world / machines);
}

}  // namespace

void simulate_machine(int rank, int world, int machines) {
  const std::string name = "bench-machine-" + std::to_string(machine_of(rank, world, machines));
  setenv("DDPH_HOSTNAME", name.c_str(), 1);
}

double bytes_to_other_machines(ddph_comm_t* comm, int rank, int world, int machines) {
  if (comm->struct_size < DDPH_COMM_SIZE_V1_2 || comm->bytes_sent_to == nullptr) return -1;
  double sum = 0;
  for (int peer = 0; peer < world; ++peer)
    if (machine_of(peer, world, machines) != machine_of(rank, world, machines))
      sum += double(comm->bytes_sent_to(comm->ctx, peer));
  return sum;
}

}  // namespace ddph_tool
