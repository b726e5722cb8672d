// The compressed step of a powersgd hook (what PyTorch's powerSGD_hook and
// batched_powerSGD_hook do once start_iter is reached), which the
// layer-wise and batched hooks implement, and what it works with. The hook
// around it (psgd_hook.h) does the rest: the steps before start_iter, the
// fp32 working copy of 16-bit buckets, where P, Q and errors live, and the
// step's log line.
#pragma once

#include <ddph/ddph.h>

#include <cstddef>
#include <cstdint>

#include "core/base/dtype.h"
#include "core/kernels/on_device.h"
#include "plugins/powersgd/collectives.h"
#include "plugins/powersgd/math_ops.h"
#include "plugins/powersgd/options.h"
#include "plugins/powersgd/resident_factors.h"
#include "plugins/powersgd/step_log.h"
#include "plugins/powersgd/torch_rng.h"

namespace ddph {
namespace powersgd {

// One bucket's step: every reference is the hook's, lent for the step.
struct StepContext {
  const ddph_bucket_t& bucket;
  DType wire;  // the bucket's own dtype, which the collectives use
  const char* name;
  const PsgdOptions& opts;
  const Where& at;          // the bucket's memory and stream
  LowRankOps& ops;          // the arithmetic in that memory
  ResidentFactors& memory;  // P, Q and errors of every bucket index
  Collectives& comm;
  StepLog& log;
  Mt19937& rng;  // numpy's RandomState(seed)

  // Whether this step draws a fresh Q (no warm start, or none remembered).
  bool wants_fresh_q() const { return !opts.warm_start || !memory.has_factors(bucket.index); }
  // PyTorch's `torch.manual_seed(state.rng.randint(1_000_000_000))`.
  uint64_t next_q_seed() const { return numpy_randint_1e9(rng); }
};

class CompressionStep {
 public:
  virtual ~CompressionStep() = default;
  // One compressed step on data (n fp32 values in the bucket's memory: the
  // bucket, or its fp32 copy), leaving the mean's low-rank estimate in data.
  virtual void compress(const StepContext& step, float* data, size_t n) = 0;
  // Once, when the hook is opened with these options (after they are checked).
  virtual void opened(const PsgdOptions& opts) { (void)opts; }
};

}  // namespace powersgd
}  // namespace ddph
