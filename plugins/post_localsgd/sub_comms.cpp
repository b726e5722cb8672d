#include "plugins/post_localsgd/sub_comms.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "core/comm_call.h"
#include "core/error.h"
#include "core/tensor.h"

namespace ddph {
namespace post_localsgd {

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

GroupComm::GroupComm(ddph_comm_t* world, const std::vector<int>& colors, const char* hook) {
  const int rank = comm_rank(world);
  const bool whole = std::all_of(colors.begin(), colors.end(), [](int c) { return c == 0; });
  if (whole) {
    comm_ = world;
    return;
  }
  DDPH_CHECK(world->split != nullptr, DDPH_UNSUPPORTED,
             hook << ": the communicator cannot split into subgroups (its split is NULL)");
  DDPH_CALL(world->split(world->ctx, colors[size_t(rank)], rank, &comm_));
  DDPH_CHECK(comm_ != nullptr, DDPH_INTERNAL, hook << ": split gave rank " << rank << " no group");
  owned_ = true;
}

GroupComm::~GroupComm() {
  if (owned_ && comm_ != nullptr && comm_->destroy != nullptr) comm_->destroy(comm_->ctx);
}

}  // namespace post_localsgd
}  // namespace ddph
