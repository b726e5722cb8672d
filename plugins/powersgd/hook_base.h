// What both powersgd hooks share: the plain-allreduce phase before
// start_iter, the fp32 working copy of 16-bit buckets (fp16_wrapper,
// bf16_wrapper), error-feedback buffers, P and Q between steps, the step
// counter, fresh-Q seeds, checkpoints and statistics. A subclass implements
// one compressed step through ops_ (math_ops.h), so host and CUDA buckets
// run the same step: only the memory and the arithmetic's implementation
// differ.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "core/hook/hook.h"
#include "core/kernels/on_device.h"
#include "plugins/powersgd/bucket_plan.h"
#include "plugins/powersgd/math_ops.h"
#include "plugins/powersgd/options.h"
#include "plugins/powersgd/state.h"

namespace ddph {
namespace powersgd {

class PsgdHook : public Hook {
 public:
  static constexpr uint32_t kFlags = 0;
  // CUDA buckets: P, Q and errors live on the bucket's GPU and the step is
  // enqueued on bucket.stream (math_ops.h, cuda/cuda_ops.h).
  static constexpr bool kRunsOnCuda = true;

  PsgdHook(const ddph_hook_init_t& init, const char* name, HookKind kind);
  ~PsgdHook() override;
  void run(const ddph_bucket_t& bucket, DType dtype, const Completion& done) override;
  void save_state(ddph_write_fn write, void* sink) override;
  void load_state(const void* bytes, size_t n) override;

 protected:
  // One compressed step on data (n fp32 values in the bucket's memory: the
  // bucket, or its fp32 copy), leaving the mean's low-rank estimate in
  // data. `wire` is the bucket's own dtype, which the collectives use.
  virtual void compress(const ddph_bucket_t& bucket, float* data, size_t n, DType wire) = 0;

  // The error buffer of a bucket index, n floats in the step's memory:
  // zeros on first use. A remembered buffer of another length (a checkpoint
  // of another model) is an error rather than noise added to the wrong
  // elements.
  float* error_buffer(uint64_t index, size_t n);

  // P and Q of a bucket index in the step's memory.
  struct Factors {
    float* p;
    float* q;
  };
  // Whether this step draws a fresh Q (no warm start, or none remembered).
  bool wants_fresh_q(uint64_t index);
  // A zero P of p_numel floats and Q = q_host (drawn on the host: PyTorch's
  // generator), remembered as the bucket's.
  Factors fresh_factors(uint64_t index, size_t p_numel, const std::vector<float>& q_host);
  // The remembered P and Q; throws unless they have the lengths the layout needs.
  Factors remembered_factors(uint64_t index, size_t p_numel, size_t q_numel);

  // The deferred error (math_ops.h's defers_error): after a step with error
  // feedback on the host, the error buffer of a bucket keeps M, and the
  // error is M - P Q^T over `matrices` with that step's P and Q (copies).
  // Checkpoints, and a bucket that moves to a GPU, get it settled.
  struct Deferred {
    std::vector<MatrixSlot> matrices;
    std::vector<float> p, q;
  };
  void defer_error(uint64_t index, const std::vector<MatrixSlot>& matrices, const Factors& f,
                   size_t p_numel, size_t q_numel);
  // The deferred error of `index` if it is deferred over these matrices;
  // NULL if it is not deferred. If it is deferred over other matrices (the
  // layout changed), it is settled into the error buffer first and NULL is
  // returned. Call forget_deferred once the error buffer holds the new M.
  const Deferred* deferred_error(uint64_t index, const std::vector<MatrixSlot>& matrices);
  void forget_deferred(uint64_t index) { deferred_.erase(index); }

  // Huge values (huge_values.h, docs/powersgd.md "Huge values"): a cleared
  // flag for ops_->flag_unusable, one float in the step's memory.
  ScratchBuffers::Lease unusable_flag();
  // The largest |Q| a step goes on with: kFactorLimit / rank.
  float q_limit() const;
  // What the uncompressed elements are multiplied by before their sum over
  // ranks (and divided by after the mean): a power of two at most 1 / (2
  // world), so that the sum cannot overflow and, above the subnormals, the
  // mean keeps PyTorch's bits (sum, then divide). 1 under fp16_wrapper,
  // where it would push small values into fp16's subnormals.
  float uncompressed_scale(DType wire) const;
  // The mean over ranks of `count` values of M, uncompressed (divide first,
  // fp32 on the wire), for a matrix whose factors are unusable this step.
  // With error feedback m is the error buffer holding M (a sum there that
  // overflowed counts as +-FLT_MAX: overflow_to_max against data), which
  // then becomes M - mean (fallback_error); else m holds M as the data
  // does. The first data_count values of the mean go to data.
  void average_uncompressed(float* m, bool feedback, float* data, size_t count, size_t data_count);

  // PyTorch's `torch.manual_seed(state.rng.randint(1_000_000_000))`.
  uint64_t next_q_seed() { return numpy_randint_1e9(state_.rng); }
  // In-place SUM over ranks of fp32 values, sent in `wire` precision.
  void allreduce_sum(float* x, size_t n, DType wire);
  // x /= world size, with core's divide (the same bits on host and GPU).
  void divide_by_world(float* x, size_t n);
  // Counts PyTorch's compression statistics, in elements of the bucket dtype.
  void count_compression(uint64_t numel_before, uint64_t numel_after, DType wire);

  const char* name_;
  ddph_comm_t* comm_;
  int world_;
  PsgdOptions opts_;
  PsgdState state_;
  // This step's memory and arithmetic (set by run()).
  Where at_{};
  LowRankOps* ops_ = nullptr;
  std::vector<float> fresh_q_;  // host buffer a fresh Q is drawn into

 private:
  // A float array in resident_ops_'s memory.
  struct Array {
    float* data = nullptr;
    size_t size = 0;
  };
  // P, Q and error of a bucket index while a step's memory holds them; the
  // state's host vectors of that index are empty meanwhile.
  struct Resident {
    Array p, q, error;
  };

  void bind(const ddph_bucket_t& bucket);
  Resident& resident(uint64_t index);
  void fit(Array& a, size_t n);
  // Copies index's arrays to the host state, with its error settled.
  void download_into(uint64_t index, const Resident& r, BucketMemory& m);
  // error -= P Q^T over the deferred matrices (host memory).
  void settle(const Deferred& d, float* error);
  // Moves every resident array back into state_ (a bucket changed memory).
  void evict_to_host();
  void release_all();
  void check_length(size_t have, size_t want, uint64_t index, const char* what);
  void finish_step(const ddph_bucket_t& bucket);

  HookKind kind_;
  std::map<uint64_t, Resident> resident_;
  std::map<uint64_t, Deferred> deferred_;  // host buckets only; their error is resident
  LowRankOps* resident_ops_ = nullptr;     // whose memory resident_ is in
  std::unique_ptr<LowRankOps> cuda_ops_;
  int cuda_device_ = -1;
  ScratchBuffers work_;          // fp32 copy of a 16-bit bucket
  ScratchBuffers wire_;          // 16-bit copy of what goes on the wire
  ScratchBuffers flag_;          // unusable_flag
  ScratchBuffers uncompressed_;  // average_uncompressed's buffer
  uint64_t step_before_ = 0, step_after_ = 0;
  // This step's seconds in the hook and, of those, in collectives: the
  // DEBUG log line splits compression time from communication time. On a
  // GPU both count enqueuing only.
  double step_total_s_ = 0, step_comm_s_ = 0;
};

}  // namespace powersgd
}  // namespace ddph
