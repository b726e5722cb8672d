// batched_powersgd: PyTorch's batched_powerSGD_hook, the whole bucket as one
// square matrix, zero-padded to ceil(sqrt(n))^2. PyTorch 1.13's version fails
// its own orthogonalization assertion (it passes 2-D matrices where 3-D are
// required); this one runs the algorithm that code describes.
#include <cmath>
#include <cstring>
#include <vector>

#include "core/kernels/divide.h"
#include "plugins/powersgd/hook_base.h"
#include "plugins/powersgd/hooks.h"
#include "plugins/powersgd/lowrank.h"
#include "plugins/powersgd/orthogonalize.h"

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
    float* m;
    if (opts_.error_feedback) {
      m = error_buffer(index, padded);
      for (size_t i = 0; i < n; ++i) m[i] += data[i];
    } else {
      scratch_.assign(padded, 0.0f);
      std::memcpy(scratch_.data(), data, n * sizeof(float));
      m = scratch_.data();
    }

    BucketMemory& mem = state_.buckets[index];
    const size_t factor = size_t(s) * size_t(r);
    if (!opts_.warm_start || !mem.has_pq) {
      mem.has_pq = true;
      mem.p.assign(factor, 0.0f);  // torch.empty: no draw
      mem.q.assign(factor, 0.0f);
      TorchGenerator(next_q_seed()).randn(mem.q.data(), factor);
    } else {
      check_memory(mem.p, factor, index, "P");
      check_memory(mem.q, factor, index, "Q");
    }
    orthogonalize(mem.q.data(), s, r, opts_.orthogonalization_epsilon);
    multiply_mq(m, nullptr, s, s, mem.q.data(), r, mem.p.data());
    allreduce_sum(mem.p.data(), factor, wire);
    orthogonalize(mem.p.data(), s, r, opts_.orthogonalization_epsilon);
    multiply_mtp(m, s, s, mem.p.data(), r, mem.q.data());
    allreduce_sum(mem.q.data(), factor, wire);
    divide_inplace(DType::F32, mem.q.data(), factor, world_);

    out_.resize(padded);
    reconstruct(mem.p.data(), mem.q.data(), s, s, r, out_.data(),
                opts_.error_feedback ? m : nullptr);
    std::memcpy(data, out_.data(), n * sizeof(float));
  }

 private:
  std::vector<float> scratch_, out_;
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
