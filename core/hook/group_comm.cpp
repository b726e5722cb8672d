#include "core/hook/group_comm.h"

#include <algorithm>

#include "core/base/error.h"
#include "core/comm/comm_call.h"

namespace ddph {

GroupComm::GroupComm(ddph_comm_t* world, const std::vector<int>& colors, const char* hook) {
  const int rank = comm_rank(world);
  const bool whole = std::all_of(colors.begin(), colors.end(), [](int c) { return c == 0; });
  if (whole) {
    comm_ = world;
    return;
  }
  DDPH_CHECK(world->split != nullptr, DDPH_UNSUPPORTED,
             hook << ": the communicator cannot split into subgroups (its split is NULL)");
  const int color = colors[size_t(rank)];
  DDPH_CALL(world->split(world->ctx, color < 0 ? -1 : color, rank, &comm_));
  DDPH_CHECK(comm_ != nullptr || color < 0, DDPH_INTERNAL,
             hook << ": split gave rank " << rank << " no group");
  owned_ = comm_ != nullptr;
}

GroupComm::~GroupComm() {
  if (owned_ && comm_ != nullptr && comm_->destroy != nullptr) comm_->destroy(comm_->ctx);
}

}  // namespace ddph
