// powersgd: PyTorch's powerSGD_hook, one low-rank factorization per
// gradient matrix of the bucket, step for step as PyTorch 1.13 computes it.
#include <functional>
#include <vector>

#include "core/base/phase_span.h"
#include "core/comm/pipeline.h"
#include "plugins/powersgd/bucket_plan.h"
#include "plugins/powersgd/compression_step.h"
#include "plugins/powersgd/huge_values.h"
#include "plugins/powersgd/psgd_hook.h"
#include "plugins/powersgd/torch_rng.h"
#include "plugins/powersgd/unusable_flag.h"

namespace ddph {
namespace powersgd {
namespace {

// Uncompressed elements from which, on the host, they travel apart from P,
// beside the passes over the matrices (256 KiB: about 2 ms at 1 Gbit/s,
// against the few round trips the two extra collectives cost).
constexpr size_t kRestApartMin = size_t(64) << 10;

class LayerwiseStep final : public CompressionStep {
 public:
  static constexpr HookListing kListing{
      "powersgd",
      "PowerSGD low-rank compression per gradient matrix (PyTorch's powerSGD_hook), with error "
      "feedback and warm start"};
  static constexpr HookKind kKind = HookKind::kLayerwise;
  static OptionSpecs option_specs() { return layerwise_specs(); }

  void compress(const StepContext& ctx, float* data, size_t n) override {
    LowRankOps& ops = ctx.ops;
    const PsgdOptions& opts = ctx.opts;
    ResidentFactors& memory = ctx.memory;
    Collectives& comm = ctx.comm;
    const DType wire = ctx.wire;
    const uint64_t index = ctx.bucket.index;
    const BucketPlan plan = plan_bucket(ctx.bucket, opts.rank, opts.min_compression_rate, ctx.name);
    ctx.log.count_compression(uint64_t(plan.numel_before), uint64_t(plan.numel_after), wire);

    // M: the bucket plus last step's error. With error feedback it is built
    // in the error buffer, which then still holds M ("input_tensor_cp") when
    // the new error M - result is formed, without a third copy of the bucket.
    // Matrices get their M while P = M Q is computed (one pass); the
    // uncompressed segments here.
    float* err = opts.error_feedback ? memory.error_buffer(index, n, ctx.name) : nullptr;
    float* m = err != nullptr ? err : data;
    // On the host the matrices' error stays deferred between steps
    // (resident_factors.h).
    const bool defer = err != nullptr && ops.defers_error();
    const ResidentFactors::Deferred* last =
        defer ? memory.deferred_error(index, plan.matrices) : nullptr;
    if (err != nullptr)
      for (const Segment& s : plan.uncompressed)
        ops.add(err + s.offset, data + s.offset, size_t(s.numel));

    const Factors f = step_factors(ctx, size_t(plan.p_numel), size_t(plan.q_numel),
                                   [&](float* q) { draw_q(plan, ctx, q); });
    // A shape group's matrices are contiguous in P and Q: one batched call each.
    for (const ShapeGroup& g : plan.groups)
      ops.orthogonalize(f.q + plan.matrices[size_t(g.members.front())].q_offset,
                        int(g.members.size()), g.cols, g.r, opts.orthogonalization_epsilon);
    // That Q stays a matrix's if its factors turn out unusable (huge values).
    const size_t q_numel = size_t(plan.q_numel);
    ScratchBuffers::Lease q_lease = q_at_start(ctx, f.q, q_numel);
    const float* q_start = static_cast<const float*>(q_lease.data());

    // One allreduce carries the uncompressed gradients and every P: PyTorch
    // sends them in two, but a sum is a sum, and each collective costs a
    // round of messages. The uncompressed ones are scaled down by a power of
    // two first, so that their sum cannot overflow.
    //
    // On the host a large uncompressed rest travels apart instead, in three
    // pieces, each beside one of the step's passes over the matrices
    // (P = M Q, Q = M^T P, the reconstruction), so that its bytes are on the
    // wire while the passes run (as PyTorch sends it while it computes P).
    // That needs a spare core for the passes while the collective runs, so
    // option overlap_rest turns it on (docs/powersgd.md has the figures).
    const size_t u = size_t(plan.uncompressed_numel);
    const size_t p_numel = size_t(plan.p_numel);
    const bool rest_apart = opts.overlap_rest && !ctx.at.cuda() && u >= kRestApartMin;
    const float down = comm.uncompressed_scale(wire);
    ScratchBuffers::Lease lease = send_.get(ctx.at, 0, (u + p_numel) * sizeof(float));
    float* send = static_cast<float*>(lease.data());
    // The uncompressed segments, packed one after another at the front of send.
    float* packed = send;
    for (const Segment& s : plan.uncompressed) {
      ops.scaled_copy(packed, m + s.offset, size_t(s.numel), down);
      packed += s.numel;
    }
    auto rest_piece = [&](size_t k) {
      comm.allreduce_sum(send + u * k / 3, u * (k + 1) / 3 - u * k / 3, wire);
    };
    // Runs pass beside rest piece k where the rest travels apart.
    auto beside_rest = [&](size_t k, const std::function<void()>& pass) {
      if (!rest_apart) return pass();
      run_beside(pass, [&] { rest_piece(k); });
    };
    beside_rest(0, [&] {
      PhaseSpan span(DDPH_PHASE_COMPRESS);  // P = M Q, every matrix
      for (const MatrixSlot& s : plan.matrices) {
        float* e = err == nullptr ? nullptr : err + s.offset;
        if (last != nullptr)
          ops.multiply_mq_deferred(data + s.offset, e, s.rows, s.cols, f.q + s.q_offset, s.r,
                                   send + u + s.p_offset, last->p.data() + s.p_offset,
                                   last->q.data() + s.q_offset);
        else
          ops.multiply_mq(data + s.offset, e, s.rows, s.cols, f.q + s.q_offset, s.r,
                          send + u + s.p_offset);
      }
    });
    if (last != nullptr) memory.forget_deferred(index);  // err holds this step's M now
    ops.poison_unusable(send + u, p_numel, kFactorLimit);
    if (rest_apart) {
      comm.allreduce_sum(send + u, p_numel, wire);
    } else {
      comm.allreduce_sum(send, u + p_numel, wire);
      comm.divide_by_world(send, u);  // PyTorch: sum, then div_
    }
    const float* p_sum = send + u;
    ScratchBuffers::Lease flag = unusable_flag_.cleared(ctx.at, ops);
    float* unusable = static_cast<float*>(flag.data());
    ops.flag_unusable(p_sum, p_numel, kFactorLimit, unusable);
    ops.copy(f.p, p_sum, p_numel);

    for (const ShapeGroup& g : plan.groups)
      ops.orthogonalize(f.p + plan.matrices[size_t(g.members.front())].p_offset,
                        int(g.members.size()), g.rows, g.r, opts.orthogonalization_epsilon);
    beside_rest(1, [&] {
      PhaseSpan span(DDPH_PHASE_COMPRESS);  // Q = M^T P
      for (const MatrixSlot& s : plan.matrices)
        ops.multiply_mtp(m + s.offset, s.rows, s.cols, f.p + s.p_offset, s.r, f.q + s.q_offset);
    });
    ops.poison_unusable(f.q, q_numel, kFactorLimit);
    comm.allreduce_sum(f.q, q_numel, wire);
    comm.divide_by_world(f.q, q_numel);
    ops.flag_unusable(f.q, q_numel, q_limit(opts.rank), unusable);
    // Every rank has the same sums, so every rank finds the same matrices.
    const std::vector<bool> bad = plan.matrices.empty() || !ops.flag_set(unusable)
                                      ? std::vector<bool>()
                                      : unusable_matrices(ctx, plan, p_sum, f.q);

    // The new error, M - P Q^T: formed here (eager), or by the next step.
    // A matrix with unusable factors is averaged uncompressed, through a
    // collective of its own: then the last rest piece goes first, alone.
    float* before = defer ? nullptr : err;
    auto reconstruct = [&] {
      PhaseSpan span(DDPH_PHASE_DECOMPRESS);  // P Q^T into the bucket
      for (size_t k = 0; k < plan.matrices.size(); ++k) {
        const MatrixSlot& s = plan.matrices[k];
        if (!bad.empty() && bad[k]) {
          average_unusable(ctx, s, f, q_start, data, err);
          continue;
        }
        ops.reconstruct(f.p + s.p_offset, f.q + s.q_offset, s.rows, s.cols, s.r, data + s.offset,
                        before == nullptr ? nullptr : before + s.offset);
      }
    };
    if (bad.empty()) {
      beside_rest(2, reconstruct);
    } else {
      if (rest_apart) rest_piece(2);
      reconstruct();
    }
    if (rest_apart) comm.divide_by_world(send, u);  // PyTorch: sum, then div_
    if (defer) memory.defer_error(index, plan.matrices, f, size_t(plan.p_numel), q_numel);
    packed = send;
    for (const Segment& s : plan.uncompressed) {
      float* d = data + s.offset;
      ops.scaled_copy(d, packed, size_t(s.numel), 1.0f / down);
      if (err != nullptr) ops.subtract(err + s.offset, d, size_t(s.numel));
      packed += s.numel;
    }
  }

 private:
  // Which matrices' factors are unusable (huge_values.h): their P (the
  // sums, before orthogonalization) or Q. Read on the host, after
  // flag_set said some are: a rare path.
  static std::vector<bool> unusable_matrices(const StepContext& ctx, const BucketPlan& plan,
                                             const float* p_sum, const float* q) {
    std::vector<float> p_host(size_t(plan.p_numel)), q_host(size_t(plan.q_numel));
    ctx.ops.download(p_host.data(), p_sum, p_host.size());
    ctx.ops.download(q_host.data(), q, q_host.size());
    auto any = [](const float* x, size_t n, float limit) {
      for (size_t i = 0; i < n; ++i)
        if (unusable_factor(x[i], limit)) return true;
      return false;
    };
    std::vector<bool> bad(plan.matrices.size());
    for (size_t k = 0; k < bad.size(); ++k) {
      const MatrixSlot& s = plan.matrices[k];
      bad[k] =
          any(p_host.data() + s.p_offset, size_t(s.rows) * size_t(s.r), kFactorLimit) ||
          any(q_host.data() + s.q_offset, size_t(s.cols) * size_t(s.r), q_limit(ctx.opts.rank));
    }
    return bad;
  }

  // Matrix s goes uncompressed this step: the mean of its M over ranks, its
  // error M minus that mean, a zero P (so that a deferred error adds
  // nothing) and the Q it started the step with.
  static void average_unusable(const StepContext& ctx, const MatrixSlot& s, const Factors& f,
                               const float* q_start, float* data, float* err) {
    const size_t numel = size_t(s.rows) * size_t(s.cols);
    float* d = data + s.offset;
    ctx.comm.average_uncompressed(err != nullptr ? err + s.offset : d, err != nullptr, d, numel,
                                  numel);
    ctx.ops.zero(f.p + s.p_offset, size_t(s.rows) * size_t(s.r));
    ctx.ops.copy(f.q + s.q_offset, q_start + s.q_offset, size_t(s.cols) * size_t(s.r));
  }

  // PyTorch draws one torch.randn per matrix, or per shape group with
  // batch_tensors_with_same_shape (a group's Qs are contiguous in memory),
  // all from one generator seeded from the numpy RandomState. On the host,
  // whatever memory the bucket is in: the bits are PyTorch's.
  static void draw_q(const BucketPlan& plan, const StepContext& ctx, float* q) {
    TorchGenerator gen(ctx.next_q_seed());
    for (const ShapeGroup& g : plan.groups) {
      const size_t per = size_t(g.cols) * size_t(g.r);
      float* first = q + plan.matrices[size_t(g.members.front())].q_offset;
      if (ctx.opts.batch_same_shape) {
        gen.randn(first, per * g.members.size());
      } else {
        for (int k : g.members) gen.randn(q + plan.matrices[size_t(k)].q_offset, per);
      }
    }
  }

  ScratchBuffers send_;
};

}  // namespace

const ddph_hook_t& layerwise_hook() {
  return hook_table<PsgdHookOf<LayerwiseStep>>();
}

}  // namespace powersgd
}  // namespace ddph
