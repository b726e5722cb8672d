#include "core/base/error.h"
#include "core/hook/hook.h"
#include "loader/session/session.h"

namespace ddph {
namespace loader {
namespace {

double seconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

}  // namespace

void Session::submit(const ddph_bucket_t* bucket, ddph_done_fn done, void* user) {
  DDPH_CHECK(done != nullptr, DDPH_INVALID_ARGUMENT, "ddph_session_submit: done is NULL");
  auto pending = std::make_shared<PendingBucket>(bucket, done, user);  // checks it
  std::lock_guard<std::mutex> lock(submit_mu_);
  pending->submitted = Clock::now();
  metrics_.number(*pending);
  checks_.submitted(*pending);
  worker_->post([this, pending] { run_bucket(pending); });
}

bool Session::pipelined(const HookChain& chain) const {
  return (chain.outer().hook->flags & DDPH_HOOK_PIPELINED) != 0 && checks_.allows_overlap();
}

void Session::run_bucket(const std::shared_ptr<PendingBucket>& pending_ptr) {
  PendingBucket& pending = *pending_ptr;
  const Clock::time_point started = Clock::now();
  pending.started_ns = uint64_t(
      std::chrono::duration_cast<std::chrono::nanoseconds>(started.time_since_epoch()).count());
  BucketOutcome outcome;
  outcome.queue_seconds = seconds(started - pending.submitted);
  ddph_error_t* error = errors_.broken_error();
  if (error != nullptr) {
    in_flight_.wait();  // the host's dones stay in submission order
    outcome.hook_seconds = seconds(Clock::now() - started);
    finish(pending, error, false, outcome);
    return;
  }
  const HookChain* chosen = &chains_.for_bytes(pending.bytes);
  if (chooser_ != nullptr && !chosen->is_rule) {
    try {
      chosen = &auto_chain(pending);
    } catch (const Error& e) {
      error = make_c_error(e.code(), e.what());
    }
  }
  const HookChain& chain = *chosen;
  const size_t index = size_t(&chain - chains_.all().data());
  const Started how = lanes_.runs(index) ? Started::kOnLanes
                      : pipelined(chain) ? Started::kPipelined
                                         : Started::kAlone;
  // Any other bucket runs alone, as before ABI 1.6: on the communicator, and
  // for the counters' differences around it to be its own. Pipelined
  // buckets and lanes' overlap only their own kind (lane 0 is comm_).
  if (how == Started::kAlone || how != last_started_) in_flight_.wait();
  last_started_ = how;
  // The worker starts one bucket at a time, and a pipelined hook makes its
  // collectives within run_bucket (ABI 1.6), so what the counters gain
  // until the hook returns is this bucket's alone. A lane reads its own
  // (run_on_lane.cpp).
  const Counters before =
      how == Started::kOnLanes ? Counters{} : read_counters(chain, comm_, false);
  if (error == nullptr) {
    try {
      checks_.before_hook(pending);
    } catch (const Error& e) {
      error = make_c_error(e.code(), e.what());
    }
  }
  if (error == nullptr && how == Started::kOnLanes)
    return start_on_lane(pending_ptr, index, started);
  if (error == nullptr && how == Started::kPipelined)
    return start_pipelined(pending_ptr, chain, before, started);
  if (error != nullptr) in_flight_.wait();
  if (error == nullptr) {
    // The hooks' spans: this thread's, and those of a thread of a hook's
    // own that names the bucket, until the hook is done.
    BucketRegistration registered(pending.running);
    ThreadBucket on_worker(&pending.running);
    error = run_hook_and_wait(chain.outer(), pending.bucket);
  }
  outcome.ran = true;
  if (how != Started::kOnLanes)  // else refused before it reached a lane
    outcome.bytes = read_counters(chain, comm_, false).since(before);
  outcome.hook_seconds = seconds(Clock::now() - started);
  // Ranks out of step (comm.bucket_check: strict) would pair every later
  // bucket with another one: the session stops, as on a timeout.
  finish(pending, error, error != nullptr && checks_.out_of_step(), outcome);
}

void Session::finish(PendingBucket& pending, ddph_error_t* error, bool out_of_step,
                     const BucketOutcome& outcome) {
  if (error == nullptr && pending.auto_pick.candidate >= 0)
    chooser_->measured(pending.auto_pick, pending.metrics_bucket, outcome.hook_seconds);
  if (error == nullptr) {
    ++buckets_;
    if (pending.bucket.is_last) ++steps_;
  } else if (errors_.record(error, outcome.ran, out_of_step)) {
    checks_.stop();
  }
  BucketOutcome record = outcome;
  record.ok = error == nullptr;
  metrics_.record(pending, record);
  call_done(pending, error, this);
}

}  // namespace loader
}  // namespace ddph
