#include "loader/session/bucket_checks.h"

#include <cstdlib>

#include "core/base/error.h"

namespace ddph {
namespace loader {

void apply_bucket_check_override(BucketCheck& mode) {
  const char* env = std::getenv("DDPH_BUCKET_CHECK");
  DDPH_CHECK(env == nullptr || *env == '\0' || parse_bucket_check(env, &mode),
             DDPH_INVALID_ARGUMENT,
             "environment variable DDPH_BUCKET_CHECK='" << env << "' is not auto, strict or off");
}

void BucketChecks::configure(BucketCheck mode, const std::string& comm_family, bool host_provided,
                             ddph_comm_t* comm, ddph_comm_t* control) {
  control_ = control;
  // Gloo's slots and MPI's call agreement turn calls of different lengths
  // into an error on every rank (plugins/comm_gloo/slots.h,
  // core/comm/call_agreement.h); NCCL and a host's communicator may abort or
  // hang, so with them a new layout is checked before its bucket runs.
  const bool survives = !host_provided && (comm_family == "comm_gloo" || comm_family == "comm_mpi");
  agreement_.configure(mode, survives);
  if (mode == BucketCheck::kAuto && comm_family == "comm_gloo" && !host_provided &&
      control->size(control->ctx) > 1)
    check_ahead_ = std::make_unique<CheckAhead>(control, AutoCheckPolicy{});
  if (mode != BucketCheck::kStrict) return;
  strict_calls_ = std::make_shared<StrictCalls>();
  hooks_comm_ = std::make_unique<CheckedComm>(comm, control, false, strict_calls_);
}

void BucketChecks::submitted(PendingBucket& pending) {
  if (check_ahead_)
    pending.ticket =
        check_ahead_->submitted(pending.fingerprint, pending.bytes, pending.bucket.is_last != 0);
}

void BucketChecks::before_hook(const PendingBucket& pending) {
  if (check_ahead_)
    check_ahead_->await(pending.ticket);
  else
    agreement_.before_hook(control_, pending.fingerprint, pending.bytes,
                           pending.bucket.is_last != 0);
  if (strict_calls_) strict_calls_->set_bucket(pending.fingerprint);
}

bool BucketChecks::out_of_step() const {
  return agreement_.out_of_step() || (strict_calls_ && strict_calls_->out_of_step());
}

void BucketChecks::stop() {
  if (check_ahead_) check_ahead_->stop();
}

void BucketChecks::close() {
  check_ahead_.reset();
}

}  // namespace loader
}  // namespace ddph
