// batched_powersgd: PyTorch's batched_powerSGD_hook, the whole bucket as one
// square matrix, zero-padded to ceil(sqrt(n))^2. PyTorch 1.13's version fails
// its own orthogonalization assertion (it passes 2-D matrices where 3-D are
// required); this one runs the algorithm that code describes. At low rank
// that algorithm trains real models badly (rank 1 diverges, PyTorch's too),
// so opening it warns.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/base/host.h"
#include "core/base/phase_span.h"
#include "plugins/powersgd/compression_step.h"
#include "plugins/powersgd/huge_values.h"
#include "plugins/powersgd/psgd_hook.h"
#include "plugins/powersgd/torch_rng.h"
#include "plugins/powersgd/unusable_flag.h"

namespace ddph {
namespace powersgd {
namespace {

// Up to this rank (the ranks measured), opening batched_powersgd warns (opened()).
constexpr int kLowRank = 4;

// ceil(sqrt(n)) in integers: the float square root can be off by one.
int64_t side_of(size_t n) {
  int64_t s = int64_t(std::sqrt(double(n)));
  while (s * s < int64_t(n)) ++s;
  while (s > 0 && (s - 1) * (s - 1) >= int64_t(n)) --s;
  return s;
}

class BatchedStep final : public CompressionStep {
 public:
  static constexpr HookListing kListing{
      "batched_powersgd",
      "PowerSGD on the whole bucket as one zero-padded square matrix (PyTorch's "
      "batched_powerSGD_hook, made to run; rank 1 diverged on the benchmark models, as PyTorch's "
      "does)"};
  static constexpr HookKind kKind = HookKind::kBatched;
  static OptionSpecs option_specs() { return batched_specs(); }

  // The method, not a defect (docs/powersgd.md, "Batched PowerSGD at low
  // rank"): a bucket's gradients flattened into one square matrix lose the
  // low-rank structure each layer's gradient has, so a low rank carries a
  // small part of them and error feedback piles up the rest. PyTorch's hook, step
  // for step the same, diverges as this one does; say so where it is chosen.
  void opened(const PsgdOptions& opts) override {
    if (opts.rank > kLowRank) return;
    log(DDPH_LOG_WARN, "powersgd",
        "batched_powersgd at rank " + std::to_string(opts.rank) +
            " flattens each bucket into one square matrix, of which a low rank keeps little: "
            "on the MLP of docs/performance.md rank 1 diverged (10% accuracy, chance) as "
            "PyTorch's batched_powerSGD_hook does, ranks 2 and 4 reached 32% and 66% after 300 "
            "steps where the layer-wise powersgd at rank 1 reached 76%; prefer name: powersgd "
            "(docs/powersgd.md#batched-powersgd-at-low-rank)");
  }

  size_t error_numel(size_t n) const override {
    const size_t side = size_t(side_of(n));
    return side * side;
  }

  void compress(const StepContext& ctx, float* data, size_t n) override {
    LowRankOps& ops = ctx.ops;
    const PsgdOptions& opts = ctx.opts;
    Collectives& comm = ctx.comm;
    const DType wire = ctx.wire;
    const int64_t side = side_of(n);
    DDPH_CHECK(side <= INT32_MAX, DDPH_UNSUPPORTED,
               "powersgd/" << ctx.name << ": a bucket of " << n << " elements is too large");
    const int s = int(side);
    const size_t padded = size_t(side) * size_t(side);
    // PyTorch would assert on rank > side; a rank-s factorization is exact.
    const int r = std::min(opts.rank, s);
    ctx.log.count_compression(n, uint64_t(2) * uint64_t(s) * uint64_t(opts.rank), wire);

    // M (padded): with error feedback it lives in the error buffer (see the
    // layer-wise hook), else in a scratch copy.
    ScratchBuffers::Lease copy = scratch_.get(ctx.at, 0, opts.error_feedback ? 0 : padded * 4);
    float* m;
    if (opts.error_feedback) {
      m = ctx.memory.error_buffer(ctx.bucket.index, padded, ctx.name);
      ops.add(m, data, n);
    } else {
      m = static_cast<float*>(copy.data());
      ops.copy(m, data, n);
      ops.zero(m + n, padded - n);
    }

    const size_t factor = size_t(s) * size_t(r);
    const Factors f = step_factors(
        ctx, factor, factor, [&](float* q) { TorchGenerator(ctx.next_q_seed()).randn(q, factor); });
    ops.orthogonalize(f.q, 1, s, r, opts.orthogonalization_epsilon);
    // That Q stays the bucket's if its factors turn out unusable (huge values).
    ScratchBuffers::Lease q_lease = q_at_start(ctx, f.q, factor);
    const float* q_start = static_cast<const float*>(q_lease.data());
    {
      PhaseSpan span(DDPH_PHASE_COMPRESS);
      ops.multiply_mq(m, nullptr, s, s, f.q, r, f.p);
    }
    ops.poison_unusable(f.p, factor, kFactorLimit);
    comm.allreduce_sum(f.p, factor, wire);
    ScratchBuffers::Lease flag = unusable_flag_.cleared(ctx.at, ops);
    float* unusable = static_cast<float*>(flag.data());
    ops.flag_unusable(f.p, factor, kFactorLimit, unusable);
    ops.orthogonalize(f.p, 1, s, r, opts.orthogonalization_epsilon);
    {
      PhaseSpan span(DDPH_PHASE_COMPRESS);
      ops.multiply_mtp(m, s, s, f.p, r, f.q);
    }
    ops.poison_unusable(f.q, factor, kFactorLimit);
    comm.allreduce_sum(f.q, factor, wire);
    comm.divide_by_world(f.q, factor);
    ops.flag_unusable(f.q, factor, q_limit(opts.rank), unusable);
    if (ops.flag_set(unusable)) {
      // Every rank has the same sums, so every rank goes this way: the
      // bucket uncompressed, a zero P and the Q the step started with.
      comm.average_uncompressed(m, opts.error_feedback, data, opts.error_feedback ? padded : n, n);
      ops.zero(f.p, factor);
      ops.copy(f.q, q_start, factor);
      return;
    }

    ScratchBuffers::Lease out = out_.get(ctx.at, 0, padded * 4);
    PhaseSpan span(DDPH_PHASE_DECOMPRESS);
    ops.reconstruct(f.p, f.q, s, s, r, static_cast<float*>(out.data()),
                    opts.error_feedback ? m : nullptr);
    ops.copy(data, static_cast<const float*>(out.data()), n);
  }

 private:
  ScratchBuffers scratch_, out_;
};

}  // namespace

const ddph_hook_t& batched_hook() {
  return hook_table<PsgdHookOf<BatchedStep>>();
}

}  // namespace powersgd
}  // namespace ddph
