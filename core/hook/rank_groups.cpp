#include "core/hook/rank_groups.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "core/base/error.h"
#include "core/base/tensor.h"
#include "core/comm/comm_call.h"

namespace ddph {

std::vector<int> groups_of_size(int world, int size, const char* hook) {
  DDPH_CHECK(size >= 1 && world % size == 0, DDPH_INVALID_ARGUMENT,
             hook << ": a group size of " << size << " does not divide the world size " << world);
  std::vector<int> color(static_cast<size_t>(world));
  for (int r = 0; r < world; ++r) color[size_t(r)] = r / size * size;
  return color;
}

std::vector<int> groups_from_list(const std::string& list, int world, const char* hook) {
  std::vector<int> color(size_t(world), -1);
  std::stringstream groups(list);
  std::string group;
  while (std::getline(groups, group, ';')) {
    std::stringstream ranks(group);
    std::string item;
    int first = -1;
    while (std::getline(ranks, item, ',')) {
      size_t used = 0;
      int r = -1;
      try {
        r = std::stoi(item, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      DDPH_CHECK(used != 0 && item.find_first_not_of(" ", used) == std::string::npos,
                 DDPH_INVALID_ARGUMENT,
                 hook << ": subgroups '" << list << "': '" << item << "' is not a rank");
      DDPH_CHECK(
          r >= 0 && r < world, DDPH_INVALID_ARGUMENT,
          hook << ": subgroups '" << list << "': rank " << r << " is outside [0, " << world << ")");
      DDPH_CHECK(color[size_t(r)] < 0, DDPH_INVALID_ARGUMENT,
                 hook << ": subgroups '" << list << "': rank " << r << " is listed twice");
      if (first < 0) first = r;
      color[size_t(r)] = first;
    }
    DDPH_CHECK(first >= 0, DDPH_INVALID_ARGUMENT,
               hook << ": subgroups '" << list << "' has an empty group");
  }
  // Colors are the first listed rank; make them the smallest, as documented.
  std::vector<int> smallest(size_t(world), world);
  for (int r = 0; r < world; ++r) {
    DDPH_CHECK(color[size_t(r)] >= 0, DDPH_INVALID_ARGUMENT,
               hook << ": subgroups '" << list << "' leaves out rank " << r << " (world size "
                    << world << ")");
    int& s = smallest[size_t(color[size_t(r)])];
    if (r < s) s = r;
  }
  for (int r = 0; r < world; ++r) color[size_t(r)] = smallest[size_t(color[size_t(r)])];
  return color;
}

std::vector<int> groups_by_host(const std::vector<std::string>& hosts) {
  std::vector<int> color(hosts.size());
  for (size_t r = 0; r < hosts.size(); ++r) {
    size_t first = 0;
    while (hosts[first] != hosts[r]) ++first;
    color[r] = int(first);
  }
  return color;
}

std::vector<std::string> all_host_names(ddph_comm_t* world) {
  constexpr size_t kMax = 256;  // HOST_NAME_MAX is 64 on Linux
  std::vector<char> mine(kMax, 0);
  const char* env = std::getenv("DDPH_HOSTNAME");
  if (env != nullptr && env[0] != '\0')
    std::strncpy(mine.data(), env, kMax - 1);
  else
    DDPH_CHECK(gethostname(mine.data(), kMax - 1) == 0, DDPH_INTERNAL,
               "gethostname failed: " << std::strerror(errno));
  const int n = comm_size(world);
  std::vector<char> all(kMax * size_t(n));
  FlatTensor send(mine.data(), DType::U8, int64_t(kMax));
  FlatTensor recv(all.data(), DType::U8, int64_t(all.size()));
  comm_allgather(world, send, recv, nullptr);
  std::vector<std::string> hosts;
  for (int r = 0; r < n; ++r) hosts.emplace_back(all.data() + size_t(r) * kMax);
  return hosts;
}

}  // namespace ddph
