// PyTorch's default_hooks.allreduce_hook: divide by the world size first,
// then SUM in place, so the bucket ends holding the mean.
#include "core/hook/hook.h"
#include "plugins/default/hooks.h"

namespace ddph {
namespace default_family {
namespace {

class AllreduceHook : public Hook {
 public:
  static constexpr uint32_t kFlags = 0;
  // The communicator enqueues on the bucket's stream (comm_nccl).
  static constexpr bool kRunsOnCuda = true;
  explicit AllreduceHook(const ddph_hook_init_t& init) : comm_(init.comm) {}

  void run(const ddph_bucket_t& bucket, DType dtype, const Completion& done) override {
    // DDPH_AVG is defined as divide-first, exactly this hook's numerics; a
    // communicator can then divide each segment while it is in cache instead
    // of in a separate pass over the bucket.
    allreduce_bucket(comm_, bucket, dtype, DDPH_AVG);
    done.ok();
  }

 private:
  ddph_comm_t* comm_;
};

}  // namespace

const ddph_hook_t& allreduce_hook() {
  static const ddph_hook_t table = hook_table<AllreduceHook>(
      "allreduce", "mean of the bucket over all ranks: divide by world size, then allreduce SUM",
      nullptr, 0);
  return table;
}

}  // namespace default_family
}  // namespace ddph
