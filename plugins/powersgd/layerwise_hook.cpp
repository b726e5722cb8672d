// powersgd: PyTorch's powerSGD_hook, one low-rank factorization per
// gradient matrix of the bucket, step for step as PyTorch 1.13 computes it.
#include <cstring>
#include <vector>

#include "core/kernels/divide.h"
#include "plugins/powersgd/bucket_plan.h"
#include "plugins/powersgd/hook_base.h"
#include "plugins/powersgd/hooks.h"
#include "plugins/powersgd/lowrank.h"
#include "plugins/powersgd/orthogonalize.h"

namespace ddph {
namespace powersgd {
namespace {

class LayerwiseHook : public PsgdHook {
 public:
  explicit LayerwiseHook(const ddph_hook_init_t& init)
      : PsgdHook(init, "powersgd", HookKind::kLayerwise) {}

 protected:
  void compress(const ddph_bucket_t& bucket, float* data, size_t n, DType wire) override {
    const uint64_t index = bucket.index;
    const BucketPlan plan = plan_bucket(bucket, opts_.rank, opts_.min_compression_rate, name_);
    count_compression(uint64_t(plan.numel_before), uint64_t(plan.numel_after), wire);

    // M: the bucket plus last step's error. With error feedback it is built
    // in the error buffer, which then still holds M ("input_tensor_cp") when
    // the new error M - result is formed, without a third copy of the bucket.
    // Matrices get their M while P = M Q is computed (one pass); the
    // uncompressed segments here.
    float* err = opts_.error_feedback ? error_buffer(index, n) : nullptr;
    float* m = err != nullptr ? err : data;
    if (err != nullptr)
      for (const Segment& s : plan.uncompressed)
        for (int64_t i = s.offset; i < s.offset + s.numel; ++i) err[i] += data[i];

    BucketMemory& mem = state_.buckets[index];
    if (!opts_.warm_start || !mem.has_pq) {
      mem.has_pq = true;
      mem.p.assign(size_t(plan.p_numel), 0.0f);
      mem.q.assign(size_t(plan.q_numel), 0.0f);
      draw_q(plan, mem.q.data());
    } else {
      check_memory(mem.p, size_t(plan.p_numel), index, "P");
      check_memory(mem.q, size_t(plan.q_numel), index, "Q");
    }
    for (const MatrixSlot& s : plan.matrices)
      orthogonalize(mem.q.data() + s.q_offset, s.cols, s.r, opts_.orthogonalization_epsilon);

    // One allreduce carries the uncompressed gradients and every P: PyTorch
    // sends them in two, but a sum is a sum, and each collective costs a
    // round of messages.
    const size_t u = size_t(plan.uncompressed_numel);
    send_.resize(u + size_t(plan.p_numel));
    float* at = send_.data();
    for (const Segment& s : plan.uncompressed) {
      std::memcpy(at, m + s.offset, size_t(s.numel) * sizeof(float));
      at += s.numel;
    }
    for (const MatrixSlot& s : plan.matrices)
      multiply_mq(data + s.offset, err == nullptr ? nullptr : err + s.offset, s.rows, s.cols,
                  mem.q.data() + s.q_offset, s.r, send_.data() + u + s.p_offset);
    allreduce_sum(send_.data(), send_.size(), wire);
    divide_inplace(DType::F32, send_.data(), u, world_);  // PyTorch: sum, then div_
    if (plan.p_numel > 0)  // no matrix compressed: p is empty, and memcpy(NULL) is undefined
      std::memcpy(mem.p.data(), send_.data() + u, size_t(plan.p_numel) * sizeof(float));

    for (const MatrixSlot& s : plan.matrices) {
      float* p = mem.p.data() + s.p_offset;
      orthogonalize(p, s.rows, s.r, opts_.orthogonalization_epsilon);
      multiply_mtp(m + s.offset, s.rows, s.cols, p, s.r, mem.q.data() + s.q_offset);
    }
    allreduce_sum(mem.q.data(), mem.q.size(), wire);
    divide_inplace(DType::F32, mem.q.data(), mem.q.size(), world_);

    float* before = err;
    for (const MatrixSlot& s : plan.matrices)
      reconstruct(mem.p.data() + s.p_offset, mem.q.data() + s.q_offset, s.rows, s.cols, s.r,
                  data + s.offset, before == nullptr ? nullptr : before + s.offset);
    at = send_.data();
    for (const Segment& s : plan.uncompressed) {
      float* d = data + s.offset;
      std::memcpy(d, at, size_t(s.numel) * sizeof(float));
      if (before != nullptr)
        for (int64_t i = 0; i < s.numel; ++i) before[s.offset + i] -= d[i];
      at += s.numel;
    }
  }

 private:
  // PyTorch draws one torch.randn per matrix, or per shape group with
  // batch_tensors_with_same_shape (a group's Qs are contiguous in memory),
  // all from one generator seeded from the numpy RandomState.
  void draw_q(const BucketPlan& plan, float* q) {
    TorchGenerator gen(next_q_seed());
    for (const ShapeGroup& g : plan.groups) {
      const size_t per = size_t(g.cols) * size_t(g.r);
      float* first = q + plan.matrices[size_t(g.members.front())].q_offset;
      if (opts_.batch_same_shape) {
        gen.randn(first, per * g.members.size());
      } else {
        for (int k : g.members) gen.randn(q + plan.matrices[size_t(k)].q_offset, per);
      }
    }
  }

  std::vector<float> send_;
};

}  // namespace

const ddph_hook_t& layerwise_hook() {
  static const ddph_hook_t table = [] {
    size_t count = 0;
    const ddph_option_spec_t* specs = layerwise_specs(&count);
    return hook_table<LayerwiseHook>(
        "powersgd",
        "PowerSGD low-rank compression per gradient matrix (PyTorch's powerSGD_hook), with "
        "error feedback and warm start",
        specs, count, /*keeps_state=*/true);
  }();
  return table;
}

}  // namespace powersgd
}  // namespace ddph
