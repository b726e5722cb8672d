#include "plugins/hierarchical/machines.h"

#include <map>
#include <sstream>
#include <string>

#include "core/base/error.h"
#include "core/comm/comm_call.h"
#include "core/hook/rank_groups.h"

namespace ddph {
namespace hierarchical {

Machines find_machines(ddph_comm_t* world, int64_t local_size, const char* hook) {
  const int n = comm_size(world);
  DDPH_CHECK(local_size == -1 || local_size >= 1, DDPH_INVALID_ARGUMENT,
             hook << ": local_size " << local_size
                  << " is not a number of ranks per machine; give one >= 1, or -1 to group the "
                     "ranks by host name");
  Machines m;
  std::vector<std::string> hosts;
  if (local_size > 0) {
    DDPH_CHECK(local_size <= n && n % local_size == 0, DDPH_INVALID_ARGUMENT,
               hook << ": local_size " << local_size << " does not divide the world size " << n
                    << " (every machine must hold local_size ranks)");
    m.colors = groups_of_size(n, int(local_size), hook);
  } else {
    hosts = all_host_names(world);
    m.colors = groups_by_host(hosts);
  }
  std::map<int, int> sizes;  // leader -> ranks
  for (int c : m.colors) ++sizes[c];
  m.count = int(sizes.size());
  m.local_size = sizes.begin()->second;
  for (const auto& s : sizes) {
    if (s.second == m.local_size) continue;
    // Only reachable by host name: a local_size that divides the world is even.
    std::ostringstream list;
    for (const auto& t : sizes)
      list << (t.first == sizes.begin()->first ? "" : ", ") << "'" << hosts[size_t(t.first)]
           << "': " << t.second;
    DDPH_FAIL(DDPH_INVALID_ARGUMENT,
              hook << ": machines hold different numbers of ranks (" << list.str()
                   << "); every machine must hold the same number, so that the mean of the "
                      "machines' means is the mean over all ranks");
  }
  return m;
}

}  // namespace hierarchical
}  // namespace ddph
