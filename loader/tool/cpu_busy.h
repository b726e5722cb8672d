// How busy the machine's cores are during a timed region: `ddph bench`
// reports it beside each time, since a rank on a shared machine is slow
// either because it waits (for the wire) or because every core is taken.
// Read from /proc/stat, so it counts every process and the kernel's own
// network work (softirq) too, not only this rank.
#pragma once

#include <cstdint>

namespace ddph_tool {

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

}  // namespace ddph_tool
