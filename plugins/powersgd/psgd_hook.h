// A powersgd hook: one CompressionStep (the layer-wise or the batched one)
// and the parts around it, each its own component: the plain-allreduce
// steps before start_iter (warm_up.h), the fp32 working copy of 16-bit
// buckets (working_copy.h), the arithmetic for the bucket's memory
// (ops_by_device.h), P, Q and errors in that memory (resident_factors.h),
// the collectives (collectives.h), the step counter with fresh-Q seeds and
// checkpoints (state.h), and the step's log line and statistics
// (step_log.h). Host and CUDA buckets run the same step: only the memory
// and the arithmetic's implementation differ.
#pragma once

#include <cstdint>
#include <memory>

#include "core/hook/hook.h"
#include "core/kernels/on_device.h"
#include "plugins/powersgd/collectives.h"
#include "plugins/powersgd/compression_step.h"
#include "plugins/powersgd/ops_by_device.h"
#include "plugins/powersgd/options.h"
#include "plugins/powersgd/resident_factors.h"
#include "plugins/powersgd/state.h"
#include "plugins/powersgd/step_log.h"
#include "plugins/powersgd/torch_rng.h"
#include "plugins/powersgd/warm_up.h"
#include "plugins/powersgd/working_copy.h"

namespace ddph {
namespace powersgd {

class PsgdHook : public Hook {
 public:
  static constexpr uint32_t kFlags = 0;
  // CUDA buckets: P, Q and errors live on the bucket's GPU and the step is
  // enqueued on bucket.stream (math_ops.h, cuda/cuda_ops.cpp).
  static constexpr bool kRunsOnCuda = true;

  // `name` is the hook's (a literal); `step` is what it does after start_iter.
  PsgdHook(const ddph_hook_init_t& init, const char* name, HookKind kind,
           std::unique_ptr<CompressionStep> step);
  void run(const ddph_bucket_t& bucket, DType dtype, const Completion& done) override;
  void save_state(ddph_write_fn write, void* sink) override;
  void load_state(const void* bytes, size_t n) override;
  void stats(ddph_stats_t* out) const override;
  void take_residual(const ddph_bucket_t& bucket, DType dtype) override;

 private:
  // Refuses a dtype other than float32, float16 and bfloat16, naming it.
  void check_dtype(const ddph_bucket_t& bucket, DType dtype) const;
  // The arithmetic for at's memory, with P, Q and errors moved there.
  LowRankOps& bind(const Where& at);

  const char* name_;
  HookKind kind_;
  PsgdOptions opts_;
  uint64_t iter_ = 0;  // PyTorch's state.iter: steps completed (buckets with is_last)
  Mt19937 rng_;        // numpy's RandomState(seed), the source of each fresh Q's seed
  StepLog log_;
  Collectives comm_;
  WarmUp warm_up_;
  WorkingCopy working_copy_;
  OpsByDevice ops_;
  ResidentFactors memory_;
  std::unique_ptr<CompressionStep> step_;
};

// The hook class for hook_table: PsgdHook running Step, which names the
// hook (Step::kListing, its name a literal), and gives its checkpoint kind
// (Step::kKind) and option schema.
template <class Step>
class PsgdHookOf final : public PsgdHook {
 public:
  static constexpr HookListing kListing = Step::kListing;
  static OptionSpecs option_specs() { return Step::option_specs(); }
  explicit PsgdHookOf(const ddph_hook_init_t& init)
      : PsgdHook(init, kListing.name, Step::kKind, std::make_unique<Step>()) {}
  static void check_options(OptionCheck& c) { powersgd::check_options(c, kListing.name); }
};

// The family's hook tables (layerwise_hook.cpp, batched_hook.cpp), which
// plugin.cpp lists.
const ddph_hook_t& layerwise_hook();
const ddph_hook_t& batched_hook();

}  // namespace powersgd
}  // namespace ddph
