// `ddph bench --overlap N`: how much of a step's work a DDP-like step
// hides behind the backward, measured in one run.
//
// A step is N buckets, each submitted after `backward_ms` of simulated
// backward (a sleep: an accelerator's backward leaves the host's cores
// free), then a flush. Variants are timed in turn within each iteration:
//   - a hook_then_optimizer config: what it hides is the optimizer step.
//     overlap:  the config itself (inner hook, then the optimizer on each
//               bucket as soon as it is reduced), with the backward;
//     inner:    the inner hook alone, with the same backward;
//     optimizer pass: hook_then_optimizer around debugging/noop without
//               backward (the same optimizer code, without communication),
//               less a pass of debugging/noop alone (what a pass of a
//               session costs without any work: its submits, flush and
//               bucket checks).
//     added = overlap - inner is what the optimizer adds to a step;
//     hidden = 1 - added / optimizer pass. Overlap and inner differ only
//     by the optimizer, so no session overhead enters the difference.
//     Differences are taken per iteration, then their median.
//   - any other config: what it hides is the reduction, as DDP overlaps it.
//     overlap:  each bucket submitted as soon as its backward is done;
//     separate: the whole backward, then every bucket;
//     hidden work: every bucket, without backward.
//     hidden = (separate - overlap) / hidden work.
// Either way: the share of that work that no longer adds to the step time.
#pragma once

#include <string>

namespace ddph::tool {

struct OverlapOptions {
  int world = 2;
  int buckets = 4;
  double backward_ms = 5;
  int iters = 10, warmup = 2;
  bool json = false;
};

struct OverlapResult {
  bool optimizer = true;  // what is hidden: the optimizer step, else the reduction
  double overlap_s = 0, separate_s = 0, work_s = 0;
  // The optimizer: the inner hook's step, and what the optimizer adds to it.
  // separate_s is then inner_s + work_s.
  double inner_s = 0, added_s = 0;
  double hidden() const {
    if (work_s <= 0) return 0;
    return optimizer ? 1 - added_s / work_s : (separate_s - overlap_s) / work_s;
  }
};

// One rank's part (collective over all ranks). work_dir is a private folder
// of this rank for derived configs; url the rendezvous. numel: floats in all
// buckets together. Throws std::runtime_error on a hook_then_optimizer
// config without `wrap`.
OverlapResult bench_overlap(const OverlapOptions& o, const std::string& config,
                            const std::string& work_dir, const std::string& url, int rank,
                            int64_t numel);

// Rank 0's row: --json keeps hook (the chain) and config apart; the text
// names the row by `name` (the table's row name, bench_command.cpp).
void print_overlap(const OverlapOptions& o, const std::string& config, const std::string& label,
                   const std::string& name, int64_t numel, const OverlapResult& r);

}  // namespace ddph::tool
