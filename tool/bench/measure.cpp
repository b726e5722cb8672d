#include "tool/bench/measure.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace ddph::tool {
namespace {

int machine_of(int rank, int world, int machines) {
  return rank / (world / machines);
}

}  // namespace

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

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

}  // namespace ddph::tool
