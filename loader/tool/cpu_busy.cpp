#include "loader/tool/cpu_busy.h"

#include <cstdio>

namespace ddph_tool {

CpuTicks cpu_ticks() {
  CpuTicks t;
  std::FILE* f = std::fopen("/proc/stat", "r");
  if (f == nullptr) return t;
  // "cpu  user nice system idle iowait irq softirq steal ...": idle and
  // iowait are the idle time; the rest is work.
  unsigned long long v[8] = {};
  if (std::fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3],
                  &v[4], &v[5], &v[6], &v[7]) == 8) {
    for (unsigned long long x : v) t.total += x;
    t.busy = t.total - v[3] - v[4];
  }
  std::fclose(f);
  return t;
}

}  // namespace ddph_tool
