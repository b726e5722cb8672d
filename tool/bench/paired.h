// The plain `ddph bench` run of one config on one rank: timed iterations
// in pairs, the hook's bucket then the baseline's raw fp32 allreduce of the
// same buffer, so that a burst of load on the shared machine falls on both
// halves of a pair rather than on one side's iterations.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "tool/bench/options.h"

namespace ddph::tool {

// One timed iteration: its hook bucket and the baseline allreduce run right
// after it. Durations are the slowest rank's; starts are rank 0's, in
// seconds since the first timed pair began, so that they show the order
// the two ran in.
struct TimedPair {
  double hook_start_s = 0, hook_s = 0;
  double baseline_start_s = 0, baseline_s = 0;
};

struct Result {
  double median_s = 0;
  double baseline_s = 0;
  // The median of the per-pair ratios hook_s / baseline_s (pair_ratio).
  double ratio = 0;
  std::vector<TimedPair> pairs;  // in the order they ran
  double wire_bytes_per_rank = 0;
  double baseline_wire_bytes_per_rank = 0;
  // What the hook was handed and what it gave to collectives, summed over
  // the timed iterations on this rank (ddph_stats_t's bytes_in/bytes_out).
  uint64_t bytes_in = 0, bytes_out = 0;
  double cross_machine_bytes = -1;  // per bucket, all ranks; -1: not measured
  // Share of the machine's cores busy while the hook (the baseline) ran,
  // the mean of every rank's view; -1: not measured.
  double busy = -1, baseline_busy = -1;
  // After the run, the largest rank's: the bytes of its saved hook state
  // (an optimizer's state, a zero hook's shard), and the peak resident
  // memory of its process so far (every config benched before included).
  double state_bytes = 0, peak_rss_bytes = 0;
  // An auto hook's choices in the timed iterations: each "candidate:reason"
  // (auto_choices.h) and how many iterations ran it, in the order first
  // seen; empty for a fixed hook.
  std::vector<std::pair<std::string, int>> choices;
};

// The ratio reported for a run: the median over pairs of hook_s /
// baseline_s. The two halves of a pair run within milliseconds of each
// other, so a change in the machine's load that outlasts a pair scales both
// and cancels in its ratio; the median then drops the pairs where a burst
// hit one half only. A ratio of the two medians could set a hook median
// from a calm stretch against a baseline median from a busy one. 0 when
// no pair has a baseline time.
double pair_ratio(const std::vector<TimedPair>& pairs);

// Runs o.warmup untimed and o.iters timed pairs of config on this rank of
// a session at rendezvous url; every rank returns the same figures but the
// pairs' starts (rank 0's are the ones reported). Throws on the session's
// errors.
Result bench_config(const BenchOptions& o, const std::string& config, const std::string& url,
                    int rank, int64_t numel);

}  // namespace ddph::tool
