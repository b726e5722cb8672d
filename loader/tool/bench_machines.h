// `ddph bench --machines M`: the local ranks as M simulated machines, and the
// bytes that cross between them. Machines are told apart by DDPH_HOSTNAME
// (hooks that group ranks by host read it), bytes are counted per peer on
// the communicator's sockets (ddph_comm_t.bytes_sent_to, ABI 1.2).
#pragma once

#include <ddph/ddph.h>

namespace ddph_tool {

// Ranks [0, W/M) are machine 0, the next W/M machine 1, ...: sets
// DDPH_HOSTNAME for this process. machines must divide world.
void simulate_machine(int rank, int world, int machines);

// Bytes this rank has sent so far to the ranks of other machines, over the
// communicator and those split from it; -1 when it cannot count per peer.
double bytes_to_other_machines(ddph_comm_t* comm, int rank, int world, int machines);

}  // namespace ddph_tool
