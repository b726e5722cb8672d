// PyTorch's default_hooks.allreduce_hook: divide by the world size first,
// then SUM in place, so the bucket ends holding the mean. With
// `divide: after` it sums first and divides the sum, as ProcessGroupGloo's
// AVG, and so FSDP2's own fp32 reduce-scatter on Gloo, does: the two orders
// round differently once the world size is not a power of two.

#include <string>

#include "core/base/error.h"
#include "core/base/options.h"
#include "core/base/tensor.h"
#include "core/comm/comm_call.h"
#include "core/hook/hook.h"
#include "core/kernels/on_device.h"
#include "plugins/default/hooks.h"

namespace ddph {
namespace default_family {
namespace {

const ddph_option_spec_t kSpecs[] = {
    spec_string("divide", "before",
                "before: divide each rank's gradient by the world size, then sum (PyTorch's "
                "allreduce_hook); after: sum, then divide the sum (ProcessGroupGloo's AVG, "
                "which FSDP2's own reduce-scatter uses)",
                "before|after"),
};

class AllreduceHook : public Hook {
 public:
  // Nothing kept from bucket to bucket (ABI 1.8): buckets may run on
  // several states of it at once.
  static constexpr uint32_t kFlags = DDPH_HOOK_STATELESS;
  static constexpr HookListing kListing{
      "allreduce",
      "mean of the bucket over all ranks: divide by world size, then allreduce SUM (or sum, then "
      "divide: option divide)"};
  // The communicator enqueues on the bucket's stream (comm_nccl), and the
  // divide after it runs there too (core/kernels/on_device.h).
  static constexpr bool kRunsOnCuda = true;
  static OptionSpecs option_specs() { return kSpecs; }

  explicit AllreduceHook(const ddph_hook_init_t& init) : comm_(init.comm) {
    // A host that makes the hook itself may pass no options (it took none
    // before `divide`): the default then holds.
    Options o(init.options, init.num_options);
    if (o.has("divide")) {
      const std::string divide = o.get_string("divide");
      DDPH_CHECK(
          divide == "before" || divide == "after", DDPH_INVALID_ARGUMENT,
          "default/allreduce: option divide is '" << divide << "'; expected before or after");
      divide_after_ = divide == "after";
    }
  }

  void run(const ddph_bucket_t& bucket, DType dtype, const Completion& done) override {
    if (!divide_after_) {
      // DDPH_AVG is defined as divide-first, exactly this hook's numerics; a
      // communicator can then divide each segment while it is in cache
      // instead of in a separate pass over the bucket.
      allreduce_bucket(comm_, bucket, dtype, DDPH_AVG);
    } else {
      allreduce_bucket(comm_, bucket, dtype, DDPH_SUM);
      const int world = comm_size(comm_);
      if (world > 1)
        divide_inplace(where_of(bucket), dtype, data_ptr(bucket.buffer),
                       size_t(bucket.buffer.shape[0]), world);
    }
    done.ok();
  }

 private:
  ddph_comm_t* comm_;
  bool divide_after_ = false;
};

}  // namespace

const ddph_hook_t& allreduce_hook() {
  return hook_table<AllreduceHook>();
}

}  // namespace default_family
}  // namespace ddph
