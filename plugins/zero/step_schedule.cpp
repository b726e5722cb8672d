#include "plugins/zero/step_schedule.h"

#include <algorithm>
#include <utility>

#include "core/base/error.h"

namespace ddph {
namespace zero {

StepSchedule::StepSchedule(bool interleaved, const char* who)
    : interleaved_(interleaved), who_(who), kept_grads_(who) {}

void StepSchedule::enter(const ddph_bucket_t& bucket) {
  if (refusing_ && bucket.step == step_) {
    if (bucket.is_last) refusing_ = false;
    DDPH_FAIL(DDPH_INVALID_ARGUMENT, who_ << ": bucket " << bucket.index << " of step "
                                          << bucket.step
                                          << " is not stepped: an earlier bucket of the step "
                                             "was refused on every rank");
  }
  refusing_ = false;
  if (bucket.step != step_) {
    step_ = bucket.step;
    kept_.clear();
    buckets_ = 0;
    problems_.clear();
  }
}

void StepSchedule::note_problem(const std::string& problem) {
  if (!problems_.empty()) problems_ += "; ";
  problems_ += problem;
}

std::string StepSchedule::take_problems() {
  std::string out = std::move(problems_);
  problems_.clear();
  return out;
}

StepSchedule::Action StepSchedule::next(bool is_last, bool owners_known,
                                        bool whole_step_checked) const {
  if (is_last) return owners_known ? Action::kStepAll : Action::kKeepAndStepAll;
  if (interleaved_ && owners_known && !whole_step_checked) return Action::kStepNow;
  return Action::kKeep;
}

void StepSchedule::keep(const BucketLayout& l, uint64_t step, const std::vector<float*>& params,
                        const float* reduced, Range span, const Where& at) {
  KeptBucket k;
  k.index = l.index;
  k.step = step;
  k.params = params;
  k.at = at;
  k.base = span.begin;
  ResidentFloats& grads = kept_grads_[l.index][0];
  grads.fit(at, span.count);
  cast_into(at, DType::F32, reduced + span.begin, DType::F32, grads.data(), span.count);
  k.grads = grads.data();
  kept_.push_back(std::move(k));
}

void StepSchedule::step_kept(const Where& at, const std::function<void(const KeptBucket&)>& step) {
  std::sort(kept_.begin(), kept_.end(),
            [](const KeptBucket& a, const KeptBucket& b) { return a.index < b.index; });
  for (const KeptBucket& k : kept_) {
    DDPH_CHECK(k.at.device.device_type == at.device.device_type &&
                   k.at.device.device_id == at.device.device_id,
               DDPH_UNSUPPORTED,
               who_ << ": bucket " << k.index << " of step " << k.step
                    << " is in other memory (host or GPU) than the step's last bucket; a "
                       "step's buckets must all be on the host or on one GPU");
    // Its gradients were reduced and kept on its own stream.
    order_after(at, k.at, who_);
    step(k);
  }
  for (const KeptBucket& k : kept_) order_after(k.at, at, who_);
  kept_.clear();
}

void StepSchedule::drop_step() {
  kept_.clear();
  buckets_ = 0;
}

void StepSchedule::end_step() {
  buckets_ = 0;
  problems_.clear();
}

}  // namespace zero
}  // namespace ddph
