// The zero hooks: ZeRO overlapped with DDP. Each rank keeps the optimizer
// state of its share of the parameters only, steps that share with core's
// functional optimizers once its gradient is reduced, and hands the
// updated values to the other ranks. The hook is composed of parts, each
// its own file: which rank steps which elements (sharding_plan.h), the
// rank's optimizer state and its checkpoints (rank_state.h), when the
// pieces are stepped (step_schedule.h), the check every rank agrees on
// before parameters move (step_checks.h), and how the bucket is reduced
// and the stepped values shared (protocol.h: allreduce, reduce_scatter,
// quantized reduce_scatter).
//
// Host and CUDA buckets run the same code: on a GPU the copies, the codec,
// the optimizer steps (their state in device memory, device_states.h) and
// the communicator's calls are enqueued on the bucket's stream, and nothing
// waits for the GPU inside run() but a host-memory communicator's staging
// and the quantized exchange's finiteness check (core/quant/codec.h).
#pragma once

#include <ddph/ddph.h>

#include <memory>
#include <vector>

#include "core/hook/hook.h"
#include "core/kernels/on_device.h"
#include "plugins/zero/layout.h"
#include "plugins/zero/options.h"
#include "plugins/zero/protocol.h"
#include "plugins/zero/rank_state.h"
#include "plugins/zero/sharding_plan.h"
#include "plugins/zero/step_schedule.h"

namespace ddph {
namespace zero {

class ZeroHook : public Hook {
 public:
  static constexpr uint32_t kFlags =
      DDPH_HOOK_NEEDS_INNER | DDPH_HOOK_NEEDS_PARAMS | DDPH_HOOK_STEPS_OPTIMIZER;
  static constexpr bool kRunsOnCuda = true;

  // `name` is the hook's (a literal); `interleaved` steps each bucket as it
  // is reduced (zero_step_interleaved) rather than at the step's end.
  ZeroHook(const ddph_hook_init_t& init, const char* name, bool interleaved);
  void run(const ddph_bucket_t& bucket, DType dtype, const Completion& done) override;
  void save_state(ddph_write_fn write, void* sink) override;
  void load_state(const void* bytes, size_t n) override;
  void stats(ddph_stats_t* out) const override;

 private:
  // The bucket's parameters into params_; one not lent is a problem told
  // to every rank before anything is stepped.
  void lend_params(const ddph_bucket_t& bucket);
  // The bucket's layout, the same as before and on every rank; regrouped
  // buckets re-cut the state.
  const BucketLayout& learn(const ddph_bucket_t& bucket);
  // Before any parameter of the step (or, in zero_step_interleaved's
  // steady steps, of the bucket) moves.
  void agree_before_stepping(bool is_last);
  // Steps this rank's pieces of l (reduced holds its gradient elements
  // from `base` on), then hands every rank every piece.
  void step_and_share(const BucketLayout& l, float* const* params, const float* reduced,
                      size_t base, const Where& at);
  // The step's last bucket: every kept bucket stepped and shared.
  void step_kept(const Where& at);
  void end_step();

  const char* name_;
  ddph_comm_t* comm_;
  ZeroOptions options_;
  int rank_, world_;
  ShardingPlan plan_;
  RankState state_;
  StepSchedule schedule_;
  std::unique_ptr<ZeroProtocol> protocol_;
  std::vector<float*> params_;  // reused from bucket to bucket
};

// The hook class for hook_table: zero_step or zero_step_interleaved.
template <bool kInterleaved>
class ZeroHookOf final : public ZeroHook {
 public:
  static constexpr const char* kName = kInterleaved ? "zero_step_interleaved" : "zero_step";
  explicit ZeroHookOf(const ddph_hook_init_t& init) : ZeroHook(init, kName, kInterleaved) {}
  static void check_options(OptionCheck& c) { check_zero_options(c, kName); }
};

}  // namespace zero
}  // namespace ddph
