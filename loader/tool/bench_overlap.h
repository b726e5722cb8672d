// `ddph bench --overlap N`: how much of the optimizer step
// hook_then_optimizer hides, measured on a DDP-like step in one run.
//
// A step is N buckets, each submitted after `backward_ms` of simulated
// backward (a sleep: an accelerator's backward leaves the host's cores
// free), then a flush. Three sessions per rank time three variants:
//   overlap:  the config's hook_then_optimizer (inner hook, then the
//             optimizer on each bucket as soon as it is reduced);
//   separate: the inner hook alone, then after the flush one optimizer pass
//             over every bucket (hook_then_optimizer around debugging/noop:
//             the same optimizer code, without communication);
//   optimizer: that optimizer pass alone.
// hidden = (separate - overlap) / optimizer: the share of the optimizer
// step that no longer adds to the step time.
#pragma once

#include <string>

namespace ddph_tool {

struct OverlapOptions {
  int world = 2;
  int buckets = 4;
  double backward_ms = 5;
  int iters = 10, warmup = 2;
  bool json = false;
};

struct OverlapResult {
  double overlap_s = 0, separate_s = 0, optimizer_s = 0;
  double hidden() const { return optimizer_s > 0 ? (separate_s - overlap_s) / optimizer_s : 0; }
};

// One rank's part (collective over all ranks). config names
// hook_then_optimizer with a `wrap`; work_dir is a private folder of this
// rank for the derived configs; url the rendezvous. numel: floats in all
// buckets together. Throws std::runtime_error on a config of another hook.
OverlapResult bench_overlap(const OverlapOptions& o, const std::string& config,
                            const std::string& work_dir, const std::string& url, int rank,
                            int64_t numel);

void print_overlap(const OverlapOptions& o, const std::string& label, int64_t numel,
                   const OverlapResult& r);

}  // namespace ddph_tool
