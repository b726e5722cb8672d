// comm.bucket_check (docs/config.md): that every rank runs the same bucket,
// behind one interface whatever the mode. Each is fed the fingerprint the
// session computed once, when the bucket entered (pending_bucket.h):
//   off:    a new or changed layout is compared before its bucket runs;
//   auto:   batches of buckets are compared; on Gloo ahead of the worker,
//           on a thread of their own (check_ahead.h), elsewhere on the
//           worker (BucketAgreement, rank_agreement.h);
//   strict: every bucket before its hook, and every collective the hooks
//           make, through a wrapped communicator (checked_comm.h).
#pragma once

#include <ddph/ddph.h>

#include <memory>
#include <string>

#include "loader/agreement/rank_agreement.h"
#include "loader/job/config.h"
#include "loader/session/check_ahead.h"
#include "loader/session/checked_comm.h"
#include "loader/session/pending_bucket.h"

namespace ddph {
namespace loader {

// DDPH_BUCKET_CHECK overrides the YAML's mode, as TORCH_DISTRIBUTED_DEBUG
// does PyTorch's checks; written back, so that the ranks agree on it at
// open. Throws DDPH_INVALID_ARGUMENT naming the variable for a value it does
// not know (the session carries that into the job agreement, so that every
// rank refuses the job).
void apply_bucket_check_override(BucketCheck& mode);

class BucketChecks {
 public:
  // mode: the job's, apply_bucket_check_override applied. comm_family: the communicator
  // plugin's family ("" for the host's). control: the rank-agreement
  // communicator, used by these checks only from now on.
  void configure(BucketCheck mode, const std::string& comm_family, bool host_provided,
                 ddph_comm_t* comm, ddph_comm_t* control);
  // The communicator the hooks get: wrapped in strict mode, else comm.
  ddph_comm_t* hooks_comm(ddph_comm_t* comm) const {
    return hooks_comm_ ? hooks_comm_->table() : comm;
  }
  // Whether buckets may overlap: not in strict mode, which names the
  // bucket of every collective.
  bool allows_overlap() const { return !strict_calls_; }
  // At submit, in the order the worker will run the buckets (the session's
  // submit lock): sets the bucket's ticket.
  void submitted(PendingBucket& pending);
  // On the worker, before the bucket's hook: collective when a comparison
  // is due; throws DDPH_INVALID_ARGUMENT on every rank when the ranks
  // differ, naming this rank's bucket and another's.
  void before_hook(const PendingBucket& pending);
  // After a failed bucket: whether the ranks were found out of step (a
  // rank making a hook's call where another checks a bucket, or calls of
  // different buckets): every later bucket would pair with another one.
  bool out_of_step() const;
  // After the session broke: no more comparisons ahead.
  void stop();
  // Before the control communicator goes: joins the thread that uses it.
  void close();

 private:
  ddph_comm_t* control_ = nullptr;
  BucketAgreement agreement_;  // worker thread only
  // auto on Gloo: the comparisons, made ahead; NULL otherwise.
  std::unique_ptr<CheckAhead> check_ahead_;
  // strict: the bucket whose hook runs, for the records of its calls, and
  // the communicator the hooks get. NULL otherwise.
  std::shared_ptr<StrictCalls> strict_calls_;
  std::unique_ptr<CheckedComm> hooks_comm_;
};

}  // namespace loader
}  // namespace ddph
