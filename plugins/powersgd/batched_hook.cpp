// batched_powersgd: PyTorch's batched_powerSGD_hook, the whole bucket as one
// square matrix, zero-padded to ceil(sqrt(n))^2. PyTorch 1.13's version fails
// its own orthogonalization assertion (it passes 2-D matrices where 3-D are
// required); this one runs the algorithm that code describes.
#include <algorithm>
#include <cmath>
#include <vector>

#include "plugins/powersgd/hook_base.h"
#include "plugins/powersgd/hooks.h"
#include "plugins/powersgd/huge_values.h"
#include "plugins/powersgd/torch_rng.h"

namespace ddph {
namespace powersgd {
namespace {

// ceil(sqrt(n)) in integers: the float square root can be off by one.
int64_t side_of(size_t n) {
  int64_t s = int64_t(std::sqrt(double(n)));
  while (s * s < int64_t(n)) ++s;
  while (s > 0 && (s - 1) * (s - 1) >= int64_t(n)) --s;
  return s;
}

class BatchedHook : public PsgdHook {
 public:
  explicit BatchedHook(const ddph_hook_init_t& init)
      : PsgdHook(init, "batched_powersgd", HookKind::kBatched) {}

  static void check_options(OptionCheck& c) { powersgd::check_options(c, "batched_powersgd"); }

 protected:
  void compress(const ddph_bucket_t& bucket, float* data, size_t n, DType wire) override {
    const uint64_t index = bucket.index;
    const int64_t side = side_of(n);
    DDPH_CHECK(side <= INT32_MAX, DDPH_UNSUPPORTED,
               "powersgd/" << name_ << ": a bucket of " << n << " elements is too large");
    const int s = int(side);
    const size_t padded = size_t(side) * size_t(side);
    // PyTorch would assert on rank > side; a rank-s factorization is exact.
    const int r = std::min(opts_.rank, s);
    count_compression(n, uint64_t(2) * uint64_t(s) * uint64_t(opts_.rank), wire);

    // M (padded): with error feedback it lives in the error buffer (see the
    // layer-wise hook), else in a scratch copy.
    ScratchBuffers::Lease copy = scratch_.get(at_, 0, opts_.error_feedback ? 0 : padded * 4);
    float* m;
    if (opts_.error_feedback) {
      m = error_buffer(index, padded);
      ops_->add(m, data, n);
    } else {
      m = static_cast<float*>(copy.data());
      ops_->copy(m, data, n);
      ops_->zero(m + n, padded - n);
    }

    const size_t factor = size_t(s) * size_t(r);
    Factors f{};
    if (wants_fresh_q(index)) {
      fresh_q_.assign(factor, 0.0f);  // P: torch.empty, no draw
      TorchGenerator(next_q_seed()).randn(fresh_q_.data(), factor);
      f = fresh_factors(index, factor, fresh_q_);
    } else {
      f = remembered_factors(index, factor, factor);
    }
    ops_->orthogonalize(f.q, 1, s, r, opts_.orthogonalization_epsilon);
    // That Q stays the bucket's if its factors turn out unusable (huge values).
    ScratchBuffers::Lease q_lease = q_start_.get(at_, 0, factor * sizeof(float));
    float* q_start = static_cast<float*>(q_lease.data());
    ops_->copy(q_start, f.q, factor);
    ops_->multiply_mq(m, nullptr, s, s, f.q, r, f.p);
    ops_->poison_unusable(f.p, factor, kFactorLimit);
    allreduce_sum(f.p, factor, wire);
    ScratchBuffers::Lease flag = unusable_flag();
    float* unusable = static_cast<float*>(flag.data());
    ops_->flag_unusable(f.p, factor, kFactorLimit, unusable);
    ops_->orthogonalize(f.p, 1, s, r, opts_.orthogonalization_epsilon);
    ops_->multiply_mtp(m, s, s, f.p, r, f.q);
    ops_->poison_unusable(f.q, factor, kFactorLimit);
    allreduce_sum(f.q, factor, wire);
    divide_by_world(f.q, factor);
    ops_->flag_unusable(f.q, factor, q_limit(), unusable);
    if (ops_->flag_set(unusable)) {
      // Every rank has the same sums, so every rank goes this way: the
      // bucket uncompressed, a zero P and the Q the step started with.
      average_uncompressed(m, opts_.error_feedback, data, opts_.error_feedback ? padded : n, n);
      ops_->zero(f.p, factor);
      ops_->copy(f.q, q_start, factor);
      return;
    }

    ScratchBuffers::Lease out = out_.get(at_, 0, padded * 4);
    ops_->reconstruct(f.p, f.q, s, s, r, static_cast<float*>(out.data()),
                      opts_.error_feedback ? m : nullptr);
    ops_->copy(data, static_cast<const float*>(out.data()), n);
  }

 private:
  ScratchBuffers scratch_, out_, q_start_;
};

}  // namespace

const ddph_hook_t& batched_hook() {
  static const ddph_hook_t table = [] {
    size_t count = 0;
    const ddph_option_spec_t* specs = batched_specs(&count);
    return hook_table<BatchedHook>(
        "batched_powersgd",
        "PowerSGD on the whole bucket as one zero-padded square matrix (PyTorch's "
        "batched_powerSGD_hook, working)",
        specs, count, /*keeps_state=*/true);
  }();
  return table;
}

}  // namespace powersgd
}  // namespace ddph
