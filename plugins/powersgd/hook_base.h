// What both powersgd hooks share: the plain-allreduce phase before
// start_iter, the fp32 working copy of 16-bit buckets (fp16_wrapper,
// bf16_wrapper), error-feedback buffers, the step counter, fresh-Q seeds,
// checkpoints and statistics. A subclass implements one compressed step.
#pragma once

#include <cstdint>
#include <vector>

#include "core/hook.h"
#include "plugins/powersgd/options.h"
#include "plugins/powersgd/state.h"

namespace ddph {
namespace powersgd {

class PsgdHook : public Hook {
 public:
  static constexpr uint32_t kFlags = 0;

  PsgdHook(const ddph_hook_init_t& init, const char* name, HookKind kind);
  void run(const ddph_bucket_t& bucket, DType dtype, const Completion& done) override;
  void save_state(ddph_write_fn write, void* sink) override;
  void load_state(const void* bytes, size_t n) override;

 protected:
  // One compressed step on data (n fp32 values: the bucket, or its fp32
  // copy), leaving the mean's low-rank estimate in data. `wire` is the
  // bucket's own dtype, which the collectives use.
  virtual void compress(const ddph_bucket_t& bucket, float* data, size_t n, DType wire) = 0;

  // The error buffer of a bucket index, n floats: zeros on first use. A
  // remembered buffer of another length (a checkpoint of another model) is
  // an error rather than noise added to the wrong elements.
  float* error_buffer(uint64_t index, size_t n);
  // PyTorch's `torch.manual_seed(state.rng.randint(1_000_000_000))`.
  uint64_t next_q_seed() { return numpy_randint_1e9(state_.rng); }
  // In-place SUM over ranks of fp32 values, sent in `wire` precision.
  void allreduce_sum(float* x, size_t n, DType wire);
  // Counts PyTorch's compression statistics, in elements of the bucket dtype.
  void count_compression(uint64_t numel_before, uint64_t numel_after, DType wire);
  // Throws unless a remembered P/Q has the length the layout needs.
  void check_memory(const std::vector<float>& v, size_t want, uint64_t index, const char* what);

  const char* name_;
  ddph_comm_t* comm_;
  int world_;
  PsgdOptions opts_;
  PsgdState state_;

 private:
  void finish_step(const ddph_bucket_t& bucket);
  HookKind kind_;
  std::vector<float> work_;             // fp32 copy of a 16-bit bucket
  std::vector<uint16_t> wire_scratch_;  // 16-bit copy of what goes on the wire
  uint64_t step_before_ = 0, step_after_ = 0;
  // This step's seconds in the hook and, of those, in collectives: the
  // DEBUG log line splits compression time from communication time.
  double step_total_s_ = 0, step_comm_s_ = 0;
};

}  // namespace powersgd
}  // namespace ddph
