// Communicators over groups of ranks, made when a hook is created (which is
// collective: every rank creates the same hooks in the same order).
#pragma once

#include <ddph/ddph.h>

#include <string>
#include <vector>

namespace ddph {
namespace post_localsgd {

// This rank's host name (DDPH_HOSTNAME overrides it, for containers whose
// host names mean nothing, and for tests), gathered from every rank.
std::vector<std::string> all_host_names(ddph_comm_t* world);

// A communicator over this rank's group, `colors` giving every rank's group
// (groups.h): the world's own when the group is the whole world, otherwise
// one split from it, which this object owns.
class GroupComm {
 public:
  GroupComm(ddph_comm_t* world, const std::vector<int>& colors, const char* hook);
  ~GroupComm();
  GroupComm(const GroupComm&) = delete;
  GroupComm& operator=(const GroupComm&) = delete;
  ddph_comm_t* get() const { return comm_; }

 private:
  ddph_comm_t* comm_ = nullptr;
  bool owned_ = false;
};

}  // namespace post_localsgd
}  // namespace ddph
