// `ddph bench --overlap N`: how much of a step's work a DDP-like step
// hides behind the backward, measured in one run.
//
// A step is N buckets, each submitted after `backward_ms` of simulated
// backward (a sleep: an accelerator's backward leaves the host's cores
// free), then a flush. Three variants are timed:
//   - a hook_then_optimizer config: what it hides is the optimizer step.
//     overlap:  the config itself (inner hook, then the optimizer on each
//               bucket as soon as it is reduced);
//     separate: the inner hook alone, then after the flush one optimizer
//               pass over every bucket (hook_then_optimizer around
//               debugging/noop: the same optimizer code, without
//               communication);
//     hidden work: that optimizer pass alone.
//   - any other config: what it hides is the reduction, as DDP overlaps it.
//     overlap:  each bucket submitted as soon as its backward is done;
//     separate: the whole backward, then every bucket;
//     hidden work: every bucket, without backward.
// hidden = (separate - overlap) / hidden work: the share of that work that
// no longer adds to the step time.
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
  double hidden() const { return work_s > 0 ? (separate_s - overlap_s) / work_s : 0; }
};

// One rank's part (collective over all ranks). work_dir is a private folder
// of this rank for derived configs; url the rendezvous. numel: floats in all
// buckets together. Throws std::runtime_error on a hook_then_optimizer
// config without `wrap`.
OverlapResult bench_overlap(const OverlapOptions& o, const std::string& config,
                            const std::string& work_dir, const std::string& url, int rank,
                            int64_t numel);

void print_overlap(const OverlapOptions& o, const std::string& label, int64_t numel,
                   const OverlapResult& r);

}  // namespace ddph::tool
