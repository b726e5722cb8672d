// Buckets of a chain whose outermost hook says DDPH_HOOK_PIPELINED (ABI
// 1.6): the worker starts the next one before this one's done.
#include <atomic>
#include <new>

#include "loader/session/session.h"

namespace ddph {
namespace loader {

// A started bucket of a pipelined chain: its done may arrive on any thread,
// before or after run_bucket returns. Whoever of the two comes second (the
// worker with the bytes, the done with the error) hands it to finisher_.
struct Session::InFlight {
  Session* session = nullptr;
  std::shared_ptr<PendingBucket> pending;
  Clock::time_point started, finished;
  Counters bytes;                 // written by the worker
  ddph_error_t* error = nullptr;  // written by the done
  std::atomic<int> arrivals{0};   // acq_rel: the second one sees both writes
};

void Session::start_pipelined(const std::shared_ptr<PendingBucket>& pending, const HookChain& chain,
                              const Counters& before, Clock::time_point started) {
  const ddph_hook_ref_t& hook = chain.outer();
  if (!finisher_) finisher_ = std::make_unique<Worker>();  // before any done can come
  auto* flight = new InFlight;
  flight->session = this;
  flight->pending = pending;
  flight->started = started;
  in_flight_.enter();  // before the call: done may come before it returns
  // Its spans are its own until it is finished (finish_in_flight), from
  // whatever thread the hook steps it on.
  pending->registration.reset(new (std::nothrow) BucketRegistration(pending->running));
  ddph_error_t* refused;
  {
    ThreadBucket on_worker(&pending->running);
    refused = hook.hook->run_bucket(hook.state, &pending->bucket, &on_done, flight);
  }
  const Counters bytes = read_counters(chain, comm_, false).since(before);
  if (refused != nullptr) {  // never accepted: no done will come
    pending->registration.reset();
    delete flight;
    in_flight_.leave();
    in_flight_.wait();  // its done after the earlier buckets' dones
    BucketOutcome outcome;
    outcome.ran = true;
    outcome.bytes = bytes;
    outcome.queue_seconds = std::chrono::duration<double>(started - pending->submitted).count();
    outcome.hook_seconds = std::chrono::duration<double>(Clock::now() - started).count();
    finish(*pending, refused, false, outcome);
    return;
  }
  flight->bytes = bytes;
  if (flight->arrivals.fetch_add(1, std::memory_order_acq_rel) == 1) hand_to_finisher(flight);
}

void Session::on_done(void* user, ddph_error_t* error) {
  auto* flight = static_cast<InFlight*>(user);
  flight->finished = Clock::now();
  flight->error = error;
  if (flight->arrivals.fetch_add(1, std::memory_order_acq_rel) == 1)
    flight->session->hand_to_finisher(flight);
}

void Session::hand_to_finisher(InFlight* flight) {
  finisher_->post([this, flight] { finish_in_flight(flight); });
}

void Session::finish_in_flight(InFlight* flight) {
  PendingBucket& pending = *flight->pending;
  pending.registration.reset();  // the hook is done with it
  BucketOutcome outcome;
  outcome.ran = true;
  outcome.bytes = flight->bytes;
  outcome.queue_seconds =
      std::chrono::duration<double>(flight->started - pending.submitted).count();
  outcome.hook_seconds = std::chrono::duration<double>(flight->finished - flight->started).count();
  finish(pending, flight->error, false, outcome);
  delete flight;
  in_flight_.leave();  // last: at zero, close may go on to destroy this session
}

}  // namespace loader
}  // namespace ddph
