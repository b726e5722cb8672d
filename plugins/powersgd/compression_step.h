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
#include <vector>

#include "core/base/dtype.h"
#include "core/kernels/on_device.h"
#include "plugins/powersgd/collectives.h"
#include "plugins/powersgd/math_ops.h"
#include "plugins/powersgd/options.h"
#include "plugins/powersgd/resident_factors.h"
#include "plugins/powersgd/step_log.h"
#include "plugins/powersgd/torch_rng.h"
#include "plugins/powersgd/unusable_flag.h"

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
  // The floats of the error buffer of an n-element bucket (the batched step
  // pads it to a square).
  virtual size_t error_numel(size_t n) const { return n; }

 protected:
  // The bucket's P and Q for this step: the remembered ones, or fresh ones
  // whose Q draw_q(q) fills (q_numel floats on the host; P is torch.empty).
  template <class DrawQ>
  Factors step_factors(const StepContext& ctx, size_t p_numel, size_t q_numel, DrawQ draw_q) {
    if (!ctx.wants_fresh_q())
      return ctx.memory.remembered_factors(ctx.bucket.index, p_numel, q_numel, ctx.opts.rank,
                                           ctx.name);
    fresh_q_.assign(q_numel, 0.0f);
    draw_q(fresh_q_.data());
    return ctx.memory.fresh_factors(ctx.bucket.index, p_numel, fresh_q_);
  }

  // A copy of q (q_numel floats) as the step starts, in the bucket's
  // memory: the Q that a matrix whose factors turn out unusable (huge
  // values) keeps.
  ScratchBuffers::Lease q_at_start(const StepContext& ctx, const float* q, size_t q_numel) {
    ScratchBuffers::Lease lease = q_start_.get(ctx.at, 0, q_numel * sizeof(float));
    ctx.ops.copy(static_cast<float*>(lease.data()), q, q_numel);
    return lease;
  }

  UnusableFlag unusable_flag_;

 private:
  std::vector<float> fresh_q_;  // host buffer a fresh Q is drawn into
  ScratchBuffers q_start_;
};

}  // namespace powersgd
}  // namespace ddph
