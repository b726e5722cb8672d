// Buckets of a stateless chain on lanes (lanes.h, ABI 1.8).
#include <string>

#include "core/base/error.h"
#include "core/base/tensor.h"
#include "core/comm/comm_call.h"
#include "core/hook/hook.h"
#include "loader/log_sink.h"
#include "loader/session/session.h"

namespace ddph {
namespace loader {
namespace {

constexpr int32_t kDefaultLanes = 2;

double seconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

}  // namespace

// comm.lanes, else DDPH_LANES: how many lanes this rank offers.
int64_t lanes_offered(const CommSpec& comm) {
  if (comm.lanes > 0) return comm.lanes;  // the config's reader held it to 1..kMaxLanes
  int32_t lanes = kDefaultLanes;
  env_int("DDPH_LANES", &lanes);
  DDPH_CHECK(lanes >= 1 && lanes <= kMaxLanes, DDPH_INVALID_ARGUMENT,
             "environment variable DDPH_LANES='" << lanes << "' is not a number of lanes from 1 to "
                                                 << kMaxLanes);
  return lanes;
}

void Session::create_lanes() {
  std::vector<bool> runs;
  bool any = false;
  for (const HookChain& chain : chains_.all()) {
    runs.push_back(is_stateless(chain));
    any = any || runs.back();
  }
  // Only on a Gloo communicator the session made itself: MPI may be
  // initialized for one thread at a time (docs/mpi.md), NCCL orders its
  // calls on the buckets' streams, and a host's communicator is one. Not
  // under bucket_check: strict, which names the bucket of every call. All
  // of it is the same on every rank (the job's signature).
  const std::string family = job_.comm.plugin != nullptr ? job_.comm.plugin->family() : "";
  if (!any || job_.comm.host_provided || family != "comm_gloo" || placement_.world_size < 2 ||
      !checks_.allows_overlap())
    return;
  // The ranks run the fewest lanes any of them offers: one exchange on the
  // control communicator (the check ahead has nothing to compare before the
  // first bucket), so the hooks' wire counts only buckets.
  int64_t lanes = lanes_offered_;
  FlatTensor count(&lanes, DType::I64, 1);
  comm_allreduce(control_, count, DDPH_MIN, nullptr);
  if (lanes < 2) return;
  lanes_.add_first(comm_, runs.size());
  lanes_.set_runs(runs);
  for (int64_t i = 1; i < lanes; ++i) {
    Lane& lane = lanes_.add(make_communicator(("comm.lane" + std::to_string(i)).c_str()));
    lane.chain_of.assign(runs.size(), -1);
    for (size_t c = 0; c < runs.size(); ++c) {
      if (!runs[c]) continue;
      const ResolvedHook& resolved = resolved_chain(c);
      lane.chain_of[c] = int(lane.own.all().size());
      lane.own.create(resolved, false, 0, lane.comm, device_allocator_);
    }
  }
  for (const auto& lane : lanes_.all())
    lane->worker->post([rank = placement_.rank] { set_thread_log_rank(rank); });
}

void Session::start_on_lane(const std::shared_ptr<PendingBucket>& pending, size_t index,
                            Clock::time_point started) {
  Lane& lane = lanes_.next();
  const HookChain& chain = lanes_.chain(lane, index, chains_);
  if (!finisher_) finisher_ = std::make_unique<Worker>();
  const uint64_t number = in_order_.take();
  in_flight_.enter();
  lane.worker->post([this, pending, &lane, &chain, number, started] {
    BucketOutcome outcome;
    outcome.queue_seconds = seconds(started - pending->submitted);
    // A lane may still hold buckets when another lane's broke the session.
    ddph_error_t* error = errors_.broken_error();
    if (error == nullptr) {
      const Counters before = read_counters(chain, lane.comm, false);
      {
        BucketRegistration registered(pending->running);
        ThreadBucket on_lane(&pending->running);
        error = run_hook_and_wait(chain.outer(), pending->bucket);
      }
      outcome.ran = true;
      outcome.bytes = read_counters(chain, lane.comm, false).since(before);
    }
    outcome.hook_seconds = seconds(Clock::now() - started);
    in_order_.finished(
        number,
        [this, pending, error, outcome] {
          finish(*pending, error, false, outcome);
          in_flight_.leave();  // last: at zero, close may go on to destroy this session
        },
        *finisher_);
  });
}

}  // namespace loader
}  // namespace ddph
