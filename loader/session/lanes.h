// Buckets in flight together (ABI 1.8). A chain whose every hook says
// DDPH_HOOK_STATELESS keeps nothing from one bucket to the next, so its
// buckets may run on several states of it at once: lane i has a
// communicator of its own (lane 0 the session's, the others made by the
// same comm plugin under the store prefix "comm.lane<i>"), a state of
// each such chain made on it, and a thread that runs its buckets one at a
// time. The k-th such bucket goes to lane k mod N on every rank, so the
// ranks pair the same buckets on each lane; the results are those of one
// lane, bit for bit. The host's dones still come in submission order.
#pragma once

#include <ddph/ddph.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "loader/job/config.h"
#include "loader/session/chains.h"
#include "loader/session/worker.h"

namespace ddph {
namespace loader {

// How many lanes this rank offers: the job's comm.lanes where given, else
// DDPH_LANES, else 2 (at most kMaxLanes); throws DDPH_INVALID_ARGUMENT
// naming the variable for a value out of range.
int64_t lanes_offered(const CommSpec& comm);

// Whether every hook of chain says DDPH_HOOK_STATELESS (and none makes a
// chain of its own that the flag could not speak for).
bool is_stateless(const HookChain& chain);

struct Lane {
  ddph_comm_t* comm = nullptr;  // lane 0: the session's
  bool owns_comm = false;
  Chains own;                 // lanes 1..: their states of the stateless chains
  std::vector<int> chain_of;  // the session's chain index -> own's, or -1
  std::unique_ptr<Worker> worker;
};

class Lanes {
 public:
  // Adds lane 0 over the session's comm (its chains are the session's).
  void add_first(ddph_comm_t* comm, size_t num_chains);
  // Adds a lane over comm (owned), whose own chains the caller then creates.
  Lane& add(ddph_comm_t* comm);
  size_t size() const { return lanes_.size(); }
  // Whether the session's chain `index` runs on lanes.
  bool runs(size_t index) const { return lanes_.size() > 1 && runs_[index]; }
  void set_runs(std::vector<bool> runs) { runs_ = std::move(runs); }
  // The lane of the next lane bucket, round robin (the session's worker only).
  Lane& next() { return *lanes_[next_++ % lanes_.size()]; }
  // The chain lane runs for the session's chain `index` of `session`.
  const HookChain& chain(const Lane& lane, size_t index, const Chains& session) const;
  // Runs every queued bucket to completion and joins the lanes' threads.
  void drain();
  // Destroys the lanes' hooks, then their communicators (after drain).
  void destroy();
  const std::vector<std::unique_ptr<Lane>>& all() const { return lanes_; }
  // Whether this thread is a lane's (a log sink called from a hook there).
  bool on_lane_thread() const;

 private:
  std::vector<std::unique_ptr<Lane>> lanes_;
  std::vector<bool> runs_;
  uint64_t next_ = 0;
};

// The host's dones of buckets that finish in any order, posted in the
// order they were numbered. [thread-safe]
class InOrder {
 public:
  // The next number, in submission order (the session's worker only).
  uint64_t take() { return taken_++; }
  // Posts `task` to `to` once the tasks of every earlier number have been.
  void finished(uint64_t number, std::function<void()> task, Worker& to);

 private:
  uint64_t taken_ = 0;
  std::mutex mu_;
  uint64_t next_ = 0;
  std::map<uint64_t, std::function<void()>> waiting_;
};

}  // namespace loader
}  // namespace ddph
