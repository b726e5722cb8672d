// What `ddph bench` measures beside the hook's time, and how it sums it up.
#pragma once

#include <ddph/ddph.h>

#include <cstdint>
#include <vector>

namespace ddph::tool {

// The middle of v (the mean of the two middle values for an even count); v
// is not empty.
double median(std::vector<double> v);

// How busy the machine's cores are during a timed region: bench reports it
// beside each time, since a rank on a shared machine is slow either because
// it waits (for the wire) or because every core is taken. Read from
// /proc/stat, so it counts every process and the kernel's own network work
// (softirq) too, not only this rank.
struct CpuTicks {
  uint64_t busy = 0, total = 0;  // summed over all cores, in clock ticks
};

// Now; zeros where /proc/stat cannot be read.
CpuTicks cpu_ticks();

// Busy ticks and total ticks accumulated over timed regions.
struct BusyShare {
  double busy = 0, total = 0;
  void add(const CpuTicks& begin, const CpuTicks& end) {
    busy += double(end.busy - begin.busy);
    total += double(end.total - begin.total);
  }
  // The share of all cores' time that was busy: 0 to 1; -1 when not measured.
  double share() const { return total > 0 ? busy / total : -1; }
};

// `--machines M`: the local ranks as M simulated machines, and the bytes
// that cross between them. Machines are told apart by DDPH_HOSTNAME (hooks
// that group ranks by host read it), bytes are counted per peer on the
// communicator's sockets (ddph_comm_t.bytes_sent_to, ABI 1.2).
//
// Ranks [0, W/M) are machine 0, the next W/M machine 1, ...: sets
// DDPH_HOSTNAME for this process. machines must divide world.
void simulate_machine(int rank, int world, int machines);

// Bytes this rank has sent so far to the ranks of other machines, over the
// communicator and those split from it; -1 when it cannot count per peer.
double bytes_to_other_machines(ddph_comm_t* comm, int rank, int world, int machines);

}  // namespace ddph::tool
