// A communicator over this rank's group of ranks, made when a hook is
// created (which is collective: every rank creates the same hooks in the
// same order).
#pragma once

#include <ddph/ddph.h>

#include <vector>

namespace ddph {

class GroupComm {
 public:
  // `colors` gives every rank's group (core/hook/rank_groups.h). The world's own
  // communicator when the group is the whole world; otherwise one split from
  // it, which this object owns. A negative color for this rank joins no
  // group: get() is then NULL (the split is still collective).
  GroupComm(ddph_comm_t* world, const std::vector<int>& colors, const char* hook);
  ~GroupComm();
  GroupComm(const GroupComm&) = delete;
  GroupComm& operator=(const GroupComm&) = delete;
  ddph_comm_t* get() const { return comm_; }

 private:
  ddph_comm_t* comm_ = nullptr;
  bool owned_ = false;
};

}  // namespace ddph
