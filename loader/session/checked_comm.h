// comm.bucket_check: strict. The hooks get a wrapped communicator: each
// collective first gathers, from every rank, a record of the call (kind,
// element count, dtype, op, root) and of the bucket whose hook makes it, on
// a control communicator of the same ranks, and runs only when every rank
// makes the same call. Ranks that differ all get DDPH_INVALID_ARGUMENT
// naming this rank's call and another's; no rank runs it. Communicators
// split from a wrapped one are wrapped too. This is PyTorch's
// TORCH_DISTRIBUTED_DEBUG=DETAIL for hooks: a debugging aid that costs one
// small exchange per call. Point-to-point send and recv involve two ranks
// only and are not checked.
#pragma once

#include <ddph/ddph.h>

#include <memory>
#include <mutex>

#include "loader/agreement/rank_agreement.h"

namespace ddph {
namespace loader {

// Shared by a session and every communicator it wrapped.
class StrictCalls {
 public:
  // The bucket whose hook runs now (index -1 while hooks are created).
  void set_bucket(const BucketFingerprint& fp);
  BucketFingerprint bucket() const;
  // Set when a rank was found making a call while another had left its
  // hook: the ranks are out of step, and the session breaks.
  void set_out_of_step();
  bool out_of_step() const;

 private:
  mutable std::mutex mu_;
  BucketFingerprint bucket_;
  bool out_of_step_ = false;
};

class CheckedComm {
 public:
  // Wraps inner; control carries the records and has inner's ranks (it may
  // be inner itself). With owns, destroy() destroys both (a communicator a
  // hook split and destroys); without, they outlive this object.
  CheckedComm(ddph_comm_t* inner, ddph_comm_t* control, bool owns,
              std::shared_ptr<StrictCalls> calls);
  ~CheckedComm();
  CheckedComm(const CheckedComm&) = delete;
  CheckedComm& operator=(const CheckedComm&) = delete;

  // The table the hooks call; valid while this object lives.
  ddph_comm_t* table() { return &table_; }

 private:
  struct Calls;  // the table's functions (checked_comm.cpp)
  // Returns when every rank makes this call; throws DDPH_INVALID_ARGUMENT,
  // naming the calls, where they differ.
  void agree(const CallShape& call);

  ddph_comm_t* inner_;
  ddph_comm_t* control_;
  bool owns_;
  std::shared_ptr<StrictCalls> calls_;
  ddph_comm_t table_{};
};

// A wrapped sub-communicator for a communicator a hook split: its control
// is split from it where it can be, else it is its own control.
// Takes ownership of sub (destroyed on failure).
ddph_comm_t* wrap_split(ddph_comm_t* sub, std::shared_ptr<StrictCalls> calls);

}  // namespace loader
}  // namespace ddph
