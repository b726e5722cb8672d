// Some work runs on the machine leaders only (making and running the inner
// hook). If it fails there, the other ranks must fail too, and at once,
// rather than wait for a broadcast that never comes until the timeout.
#pragma once

#include <ddph/ddph.h>

#include <string>

#include "core/base/error.h"

namespace ddph {
namespace hierarchical {

// The outcome of a step: success, or the error it threw.
class Outcome {
 public:
  // Runs fn, keeping a ddph::Error it throws instead of letting it go.
  template <class Fn>
  void capture(Fn&& fn) {
    try {
      fn();
    } catch (const Error& e) {
      code_ = e.code();
      message_ = e.what();
    }
  }
  bool ok() const { return code_ == DDPH_OK; }
  // Collective over leaders: a rank that succeeded learns that another one
  // failed (its outcome then names the lowest failing leader's code).
  void agree(ddph_comm_t* leaders, const char* what);
  // Collective over local: local rank 0 (the leader) hands its outcome to
  // the ranks of its machine, who take it as theirs. A few bytes of host
  // memory, which every communicator carries (NCCL stages them).
  void share_from_leader(ddph_comm_t* local, int world_rank_of_leader, const char* what);
  // Throws the kept error, if any.
  void rethrow() const;

 private:
  ddph_code_t code_ = DDPH_OK;
  std::string message_;
};

}  // namespace hierarchical
}  // namespace ddph
