// A session: one communicator, one hook chain for `hook` and one per rule,
// and a worker thread that runs buckets in submission order. This is the C++
// object behind ddph_session_t; c_api.cpp is the thin ABI layer over it.
#pragma once

#include <ddph/ddph.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "loader/agreement/rank_agreement.h"
#include "loader/check_ahead.h"
#include "loader/checked_comm.h"
#include "loader/hook_chain.h"
#include "loader/job/job.h"
#include "loader/job/job_store.h"
#include "loader/metrics_ring.h"
#include "loader/span_registry.h"
#include "loader/worker.h"

namespace ddph {
namespace loader {

// Outermost hook first. Rule chains match buckets of at most max_bytes.
struct HookChain {
  ChainElements elements;
  bool is_rule = false;
  uint64_t max_bytes = 0;
};

// rank/world as the session resolved them, for the comm init and for tools.
struct Placement {
  int32_t rank = 0;
  int32_t world_size = 1;
};

// Resolves rank and world size: session options (>= 0), then YAML, then env
// DDPH_RANK/DDPH_WORLD_SIZE, then RANK/WORLD_SIZE, else 0 and 1.
Placement resolve_placement(int32_t opt_rank, int32_t opt_world, const CommSpec& yaml);

class Session {
 public:
  // Validates opts, loads and checks the job, connects, creates the hooks.
  // Throws ddph::Error; a bad config never reaches the communicator.
  explicit Session(const ddph_session_options_t& opts);
  // Waits for in-flight buckets, destroys hooks (outer first), then the
  // communicator (unless the host's), then lets the plugins unload.
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  void submit(const ddph_bucket_t* bucket, ddph_done_fn done, void* user);
  // The first error since the last flush, as a new C error (NULL if none).
  ddph_error_t* flush();
  void stats(ddph_stats_t* out) const;
  // The oldest bucket record not taken yet into *out (up to
  // out->struct_size); false when there is none.
  bool take_metrics(ddph_bucket_metrics_t* out);
  // The oldest span (ABI 1.7) not taken yet, the same way.
  bool take_spans(ddph_span_t* out);
  void save_state(ddph_write_fn write, void* sink);
  void load_state(const void* bytes, size_t n);
  ddph_comm_t* comm() const { return comm_; }
  const Placement& placement() const { return placement_; }

 private:
  struct PendingBucket;
  struct InFlight;
  void create_communicator(const ddph_session_options_t& opts);
  void create_control_communicator();
  // comm.bucket_check: what run_bucket checks, and in strict mode the
  // hooks' wrapped communicator. After the control communicator.
  void configure_bucket_check();
  ddph_comm_t* hooks_comm() const { return hooks_comm_ ? hooks_comm_->table() : comm_; }
  void destroy_communicators();
  void create_chain(const ResolvedHook& resolved, bool is_rule, uint64_t max_bytes);
  const HookChain& chain_for(uint64_t bytes) const;
  // Whether the worker may start the chain's next bucket before this one is
  // done: its outermost hook says DDPH_HOOK_PIPELINED (ABI 1.6), and
  // bucket_check is not strict (which names the bucket of every collective).
  bool pipelined(const HookChain& chain) const;
  // On the worker. A pipelined chain's bucket is finished on finisher_
  // (hand_to_finisher); every other bucket is finished here.
  void run_bucket(const std::shared_ptr<PendingBucket>& pending);
  struct Counters {
    uint64_t bytes_in = 0, bytes_out = 0, wire_bytes = 0;
  };
  // strict: a hook's stats() error is thrown (ddph_session_stats); else its
  // bytes read as 0 (a bucket's record, on the worker).
  Counters counters(const HookChain& chain, bool strict) const;
  // after - before, field by field.
  static Counters bytes_between(const Counters& before, const Counters& after);
  // Starts a bucket of a pipelined chain and returns without waiting for it.
  // `before`: counters() when the worker took it up.
  void start_pipelined(const std::shared_ptr<PendingBucket>& pending, const HookChain& chain,
                       const Counters& before, std::chrono::steady_clock::time_point started);
  static void on_done(void* user, ddph_error_t* error);
  // A pipelined bucket whose done and whose run_bucket have both returned
  // is finished on finisher_, in the order they complete (the submission
  // order: the hook's dones come in order). The host's done then never runs
  // on the worker, where it would hold up the next bucket, nor on the hook's
  // thread, where it would hold up the hook's next step.
  void hand_to_finisher(InFlight* flight);
  void finish_in_flight(InFlight* flight);
  // One started pipelined bucket less; wakes wait_in_flight at zero.
  void leave_in_flight();
  // Everything that follows a bucket's completion, on any thread: counters,
  // the first error, broken_, its metrics record, then the host's done.
  // out_of_step: the worker found the ranks out of step (breaks the session).
  void finish(PendingBucket& pending, ddph_error_t* error, bool out_of_step, bool ran,
              const Counters& bytes, double queue_seconds, double hook_seconds);
  void record_metrics(const PendingBucket& pending, bool ran, const Counters& bytes,
                      double queue_seconds, double hook_seconds, bool ok);
  // Blocks until every started pipelined bucket has been finished (its
  // host done has returned).
  void wait_in_flight();
  void destroy_hooks();
  void check_not_in_done(const char* function) const;

 public:
  // Whether this thread is one the session waits for when it closes: its
  // worker (a done callback, or a log sink called from a hook), or a done
  // callback on its finisher. ddph_session_close from there would wait for
  // itself.
  bool on_own_thread() const;

 private:
  Job job_;
  Placement placement_;
  // The job-scoped rendezvous store handed to the communicator (NULL when
  // the host provides the communicator); outlives the communicators.
  std::unique_ptr<JobStore> job_store_;
  ddph_comm_t* comm_ = nullptr;
  bool owns_comm_ = false;
  // The host's (ABI 1.3), handed to the communicator and every hook; or NULL.
  const ddph_device_allocator_t* device_allocator_ = nullptr;
  ddph_comm_t* control_ = nullptr;  // for rank agreement: split from comm_ (owned), or comm_
  // Rule chains first (in YAML order), then the main chain last.
  std::vector<HookChain> chains_;

  std::atomic<uint64_t> steps_{0}, buckets_{0};
  // Per-bucket figures (ddph_session_take_metrics), and the step and
  // bucket-in-step of the next submission (under submit_mu_).
  MetricsRing metrics_;
  // The phases the hooks reported of its buckets (ddph_session_take_spans).
  SpanRing spans_;
  uint64_t next_metrics_step_ = 0;
  uint32_t next_metrics_bucket_ = 0;
  // The outcome of finished buckets, which pipelined buckets report from
  // finisher_.
  std::mutex errors_mu_;
  bool has_first_error_ = false;  // since the last flush
  ddph_code_t first_error_code_ = DDPH_OK;
  std::string first_error_message_;
  bool broken_ = false;  // after a comm failure or timeout
  std::string broken_since_;
  // Pipelined buckets started and not finished yet. Flush, checkpoints,
  // close and any bucket not started pipelined wait for none to be left,
  // which also keeps the host's dones in submission order.
  std::mutex in_flight_mu_;
  std::condition_variable in_flight_cv_;
  uint64_t in_flight_ = 0;
  BucketAgreement agreement_;  // worker thread only
  // comm.bucket_check: strict: the bucket whose hook runs, for the records
  // of its calls, and the communicator the hooks get. NULL otherwise.
  std::shared_ptr<StrictCalls> strict_calls_;
  std::unique_ptr<CheckedComm> hooks_comm_;
  // comm.bucket_check: auto on Gloo: the comparisons, made ahead on a
  // thread of their own (check_ahead.h); NULL otherwise. submit_mu_ keeps
  // its order the worker's.
  std::unique_ptr<CheckAhead> check_ahead_;
  std::mutex submit_mu_;

  // Last member: destroyed (drained and joined) first.
  std::unique_ptr<Worker> worker_;
  // Made on the worker by the first pipelined bucket (hand_to_finisher).
  std::unique_ptr<Worker> finisher_;
};

}  // namespace loader
}  // namespace ddph
