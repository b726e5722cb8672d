// A session: one communicator, one hook chain for `hook` and one per rule,
// and a worker thread that runs buckets in submission order. This is the C++
// object behind ddph_session_t; c_api.cpp is the thin ABI layer over it.
// Its parts, one concern each (docs/architecture.md):
//   setup.cpp        open and close: job, communicators, checks, chains
//   run_bucket.cpp   submit, one bucket on the worker, its finish
//   pipelined.cpp    buckets of a DDPH_HOOK_PIPELINED chain (ABI 1.6)
//   run_on_lane.cpp  buckets of a DDPH_HOOK_STATELESS chain on lanes (1.8)
//   host_calls.cpp   flush, stats, metrics, checkpoints
//   bucket_checks.h  comm.bucket_check, errors.h, metrics.h
#pragma once

#include <ddph/ddph.h>

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "loader/job/job.h"
#include "loader/job/job_store.h"
#include "loader/session/bucket_checks.h"
#include "loader/session/chains.h"
#include "loader/session/errors.h"
#include "loader/session/in_flight.h"
#include "loader/session/lanes.h"
#include "loader/session/metrics.h"
#include "loader/session/pending_bucket.h"
#include "loader/session/placement.h"
#include "loader/session/state_blob.h"
#include "loader/session/worker.h"

namespace ddph {
namespace loader {

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

  // Validates the bucket (the only check of it on the session's path) and
  // queues it; throws on a malformed one, whose done is then not called.
  void submit(const ddph_bucket_t* bucket, ddph_done_fn done, void* user);
  // The first error since the last flush, as a new C error (NULL if none).
  ddph_error_t* flush();
  void stats(ddph_stats_t* out) const;
  // The oldest bucket record not taken yet into *out (up to
  // out->struct_size); false when there is none.
  bool take_metrics(ddph_bucket_metrics_t* out) { return metrics_.take_metrics(out); }
  // The oldest span (ABI 1.7) not taken yet, the same way.
  bool take_spans(ddph_span_t* out) { return metrics_.take_spans(out); }
  void save_state(ddph_write_fn write, void* sink);
  void load_state(const void* bytes, size_t n);
  ddph_comm_t* comm() const { return comm_; }
  const Placement& placement() const { return placement_; }
  // Whether this thread is one the session waits for when it closes: its
  // worker or a lane's (a done callback, or a log sink called from a hook),
  // or a done callback on its finisher. ddph_session_close from there would wait for
  // itself.
  bool on_own_thread() const;

 private:
  using Clock = std::chrono::steady_clock;
  struct InFlight;
  // setup.cpp
  void create_communicator(const ddph_session_options_t& opts);
  // A communicator from the job's comm plugin, meeting its peers under
  // `prefix` in the job's store.
  ddph_comm_t* make_communicator(const char* prefix);
  void create_control_communicator();
  // A communicator of the same ranks split from comm_ (collective; owned by
  // the caller), or NULL where comm_ cannot split or has one rank.
  ddph_comm_t* split_of_comm();
  void destroy_communicators();
  // run_bucket.cpp. On the worker. A pipelined chain's bucket is finished
  // on finisher_ (pipelined.cpp); every other bucket is finished here.
  void run_bucket(const std::shared_ptr<PendingBucket>& pending);
  // Whether the worker may start the chain's next bucket before this one is
  // done: its outermost hook says DDPH_HOOK_PIPELINED (ABI 1.6), and
  // bucket_check is not strict (which names the bucket of every collective).
  bool pipelined(const HookChain& chain) const;
  // Everything that follows a bucket's completion, on any thread: counters,
  // the first error, a break, its metrics record, then the host's done.
  // out_of_step: the worker found the ranks out of step (breaks the session).
  void finish(PendingBucket& pending, ddph_error_t* error, bool out_of_step,
              const BucketOutcome& outcome);
  // pipelined.cpp. Starts a bucket of a pipelined chain and returns without
  // waiting for it. `before`: the counters when the worker took it up.
  void start_pipelined(const std::shared_ptr<PendingBucket>& pending, const HookChain& chain,
                       const Counters& before, Clock::time_point started);
  static void on_done(void* user, ddph_error_t* error);
  // A pipelined bucket whose done and whose run_bucket have both returned
  // is finished on finisher_, in the order they complete (the submission
  // order: the hook's dones come in order). The host's done then never runs
  // on the worker, where it would hold up the next bucket, nor on the hook's
  // thread, where it would hold up the hook's next step.
  void hand_to_finisher(InFlight* flight);
  void finish_in_flight(InFlight* flight);
  // run_on_lane.cpp. After the chains: the lanes, where the job has a
  // stateless chain and its communicator allows them (collective).
  void create_lanes();
  // Hands a bucket of the session's chain `index` to the next lane; its
  // done follows every earlier bucket's, on finisher_.
  void start_on_lane(const std::shared_ptr<PendingBucket>& pending, size_t index,
                     Clock::time_point started);
  // host_calls.cpp
  void check_not_in_done(const char* function) const;
  // The job's resolved chain for the session's chain `index`: the rules'
  // (in YAML order), then the job's hook or an auto hook's candidates.
  const ResolvedHook& resolved_chain(size_t index) const;
  // auto_steps.cpp. For `hook: {family: auto}`: a chain per candidate on
  // hooks_comm, the chooser and the communicator of its exchanges
  // (collective, at open). A candidate that fails to open is named.
  void create_auto(ddph_comm_t* hooks_comm);
  // On the worker, for a bucket no rule matched: the ranks' exchange when
  // one is due at a step's start, the candidate's chain, and the residual
  // of the candidate the bucket leaves flushed into it. Throws on a failed
  // exchange or flush.
  const HookChain& auto_chain(PendingBucket& pending);
  // Checkpoints: the chooser's record, after the hooks'. read_chooser takes
  // it off `records` and returns the chooser it holds (a fresh one, said in
  // the log, for another world size), for the caller to install once the
  // hooks' records have loaded too; NULL when the job is not auto.
  void save_chooser(std::vector<StateRecord>& records) const;
  std::unique_ptr<Chooser> read_chooser(std::vector<StateRecord>& records) const;

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
  Chains chains_;
  // auto jobs only: the chooser, the communicator of its exchanges (split
  // from comm_ and owned, or control_ where nothing else uses that on
  // another thread), and each bucket index's last candidate.
  std::unique_ptr<Chooser> chooser_;
  ddph_comm_t* auto_comm_ = nullptr;
  bool owns_auto_comm_ = false;
  uint64_t auto_step_ = UINT64_MAX;  // the metrics step the chooser began last
  struct AutoLast {
    int candidate;
    uint64_t bytes;
  };
  std::map<int64_t, AutoLast> auto_last_;
  // When each bucket of the chooser's current step was submitted, by its
  // index in the step (empty: a bucket a rule ran).
  std::vector<std::optional<Clock::time_point>> auto_submitted_;
  // Whether a GPU bucket is still to be warned of: set at create_auto where
  // the backend may complete a bucket once its work is enqueued (not Gloo
  // or MPI, which stage it through the host and wait), cleared when warned.
  bool auto_gpu_warning_due_ = false;
  std::atomic<uint64_t> steps_{0}, buckets_{0};
  SessionMetrics metrics_;  // numbering under submit_mu_
  SessionErrors errors_;
  InFlightCount in_flight_;
  BucketChecks checks_;        // submitted() under submit_mu_, in the worker's order
  int64_t lanes_offered_ = 1;  // DDPH_LANES, read before connecting
  Lanes lanes_;
  InOrder in_order_;
  // How the worker started its last bucket: a bucket started another way
  // waits until none started this way is in flight (they share comm_).
  enum class Started { kAlone, kPipelined, kOnLanes } last_started_ = Started::kAlone;
  std::mutex submit_mu_;

  // Last member: destroyed (drained and joined) first.
  std::unique_ptr<Worker> worker_;
  // Made on the worker by the first pipelined bucket (start_pipelined).
  std::unique_ptr<Worker> finisher_;
};

}  // namespace loader
}  // namespace ddph
