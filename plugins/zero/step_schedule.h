// When a zero hook steps a bucket's pieces: zero_step keeps the reduced
// gradients of its share (1/world of them) and steps every bucket at the
// step's last one, as PyTorch's hook_with_zero_step does;
// zero_step_interleaved steps each bucket as it is reduced, except in a
// step that is checked whole before anything of it moves (the first, and
// the first after a load or a regroup), which it keeps as zero_step does.
// And the step's bookkeeping: which step the buckets are of, how many of
// it have run, whether the ranks refused one of it, and what this rank
// found wrong since the ranks last agreed.
#pragma once

#include <ddph/ddph.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/kernels/on_device.h"
#include "core/memory/resident_floats.h"
#include "plugins/zero/layout.h"

namespace ddph {
namespace zero {

// One bucket of the current step whose pieces are stepped at its end.
struct KeptBucket {
  uint64_t index = 0, step = 0;
  std::vector<float*> params;    // the host's parameters, lent for the step
  const float* grads = nullptr;  // reduced gradients of bucket elements [base, ...)
  size_t base = 0;
  Where at{DLDevice{kDLCPU, 0}, nullptr};  // the bucket's memory and stream
};

class StepSchedule {
 public:
  // `who` (a literal: the hook) is named in errors.
  StepSchedule(bool interleaved, const char* who);

  // A bucket enters. The rest of a step whose earlier bucket every rank
  // refused is refused too (throws DDPH_INVALID_ARGUMENT), on every rank
  // alike and without a collective, so that a failed step steps nothing.
  // A bucket of a new step drops what a step that failed before its last
  // bucket kept: its parameters were lent for that step only.
  void enter(const ddph_bucket_t& bucket);
  // Every rank refused a bucket before anything of it was stepped: unless
  // it was the step's last, the step's other buckets are refused too.
  void refused(bool is_last) { refusing_ = !is_last; }
  // The bucket entered was taken into the step.
  void counted() { ++buckets_; }

  uint64_t step() const { return step_; }
  size_t buckets_this_step() const { return buckets_; }

  // Problems (a parameter not lent) told to every rank before anything is
  // stepped, rather than thrown where found: the other ranks would wait
  // for this one in the bucket's collectives.
  void note_problem(const std::string& problem);
  std::string take_problems();

  enum class Action {
    kStepNow,         // step and share this bucket now
    kKeep,            // keep its gradients for the step's last bucket
    kStepAll,         // the last bucket: step the kept ones, then this one
    kKeepAndStepAll,  // the last, its owners known only now: keep it, step all
  };
  // owners_known: the plan has the bucket's pieces; whole_step_checked:
  // the step is checked whole before anything of it moves.
  Action next(bool is_last, bool owners_known, bool whole_step_checked) const;

  // Keeps span's gradients of l (from reduced, in at's memory) and the lent
  // parameters for the step's end. The storage stays from step to step per
  // bucket index, in the bucket's memory: a fresh vector would be faulted
  // in page by page at every step.
  void keep(const BucketLayout& l, uint64_t step, const std::vector<float*>& params,
            const float* reduced, Range span, const Where& at);
  // At the step's last bucket (in at's memory): step(kept) for every kept
  // bucket in index order, on at's stream, each ordered after its own
  // stream, which then waits for at's before the next step's reduce
  // overwrites what at still reads. Throws DDPH_UNSUPPORTED for a kept
  // bucket in other memory than at's.
  void step_kept(const Where& at, const std::function<void(const KeptBucket&)>& step);
  // A step the ranks refused: nothing of it was stepped, and what it kept
  // is dropped.
  void drop_step();
  // After the step's last bucket was stepped.
  void end_step();

 private:
  bool interleaved_;
  const char* who_;
  bool refusing_ = false;
  uint64_t step_ = 0;   // the step of the buckets being run
  size_t buckets_ = 0;  // buckets of it run so far
  std::string problems_;
  std::vector<KeptBucket> kept_;
  ResidentTable<uint64_t, 1> kept_grads_;  // by bucket index
};

}  // namespace zero
}  // namespace ddph
