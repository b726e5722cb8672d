// comm.bucket_check: auto on Gloo, off the buckets' path. A comparison of
// the ranks' batches costs a round trip on the control communicator, which
// on a loaded machine takes milliseconds (docs/benchmarks.md). Here the
// batch is folded as buckets are submitted, and a thread of its own makes
// the comparison while the hooks of earlier buckets run; the worker waits
// only before the bucket the comparison was made for, so whenever buckets
// are queued it waits for nothing.
//
// Only on Gloo: MPI may be initialized for one thread at a time
// (docs/mpi.md), and NCCL and host communicators need each new layout
// checked before it runs, which BucketAgreement does on the worker.
#pragma once

#include <ddph/ddph.h>

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include "loader/agreement/rank_agreement.h"

namespace ddph {
namespace loader {

class CheckAhead {
 public:
  // control: used by this object's thread only, from now on; size > 1.
  CheckAhead(ddph_comm_t* control, AutoCheckPolicy policy);
  // Stops and joins; a comparison in flight finishes first (within the
  // communicator's timeout).
  ~CheckAhead();
  CheckAhead(const CheckAhead&) = delete;
  CheckAhead& operator=(const CheckAhead&) = delete;

  // A bucket was submitted; call in the order the worker will run them
  // (the session's submit lock). Returns the ticket to await before its
  // hook runs, or 0 when it runs without a comparison. fp and bytes: the
  // bucket's, as the session computed them when it entered.
  uint64_t submitted(const BucketFingerprint& fp, uint64_t bytes, bool is_last);
  // On the worker, before the hook of the bucket that got `ticket`: waits
  // for its comparison; throws its error (DDPH_INVALID_ARGUMENT naming the
  // buckets, or the communicator's failure). No-op for ticket 0.
  void await(uint64_t ticket);
  // After the session broke: no more comparisons, and await returns at once.
  void stop();

 private:
  struct Job {
    uint64_t ticket;
    PendingBatch batch;
  };
  struct Verdict {
    ddph_code_t code = DDPH_OK;
    std::string message;
  };
  void loop();

  ddph_comm_t* control_;
  const AutoCheckPolicy policy_;
  // Submit side: the batch since the last comparison was queued.
  PendingBatch batch_;
  uint64_t next_ticket_ = 1;

  std::mutex mu_;
  std::condition_variable wake_, finished_cv_;
  std::deque<Job> jobs_;
  std::map<uint64_t, Verdict> verdicts_;  // failed ones, until awaited
  uint64_t finished_ = 0;                 // every ticket up to this one is decided
  bool stopping_ = false;
  std::thread thread_;  // last: starts once the rest is ready
};

}  // namespace loader
}  // namespace ddph
