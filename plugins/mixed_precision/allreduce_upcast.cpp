// PyTorch's _reducer_allreduce_and_upcast_hook (mixed_precision_hooks.py,
// PyTorch 2.0; not yet in 1.13): the bucket holds float16 or bfloat16
// gradients of parameters whose master copy is float32. Sum them in the
// bucket's dtype, divide by the world size in that dtype (sum, then divide,
// unlike allreduce_hook's divide-first), and upcast each parameter's mean
// into the float32 gradient the host lends for it.
//
// Where the fp32 gradient goes: ABI 1.1 has one tensor per parameter,
// ddph_param_t.data. This hook is flagged DDPH_HOOK_NEEDS_PARAMS |
// DDPH_HOOK_RESULT_ELSEWHERE: its result does not land in the bucket (only
// the low-precision mean does), but in params[i].data, which for this hook
// is the float32 gradient of parameter i, not the parameter
// (docs/mixed_precision.md). The RESULT_ELSEWHERE flag also makes wrappers
// that would read the bucket or the parameters (hook_then_optimizer,
// fp16_wrapper) refuse it at create time.
//
// On CUDA the divide and the upcasts are enqueued on the bucket's stream
// (core/kernels/on_device.h), into fp32 gradients on the bucket's device.
#include <vector>

#include "core/base/tensor.h"
#include "core/comm/comm_call.h"
#include "core/hook/hook_plugin.h"
#include "core/hook/param_view.h"
#include "core/kernels/on_device.h"

namespace ddph {
namespace mixed_precision {
namespace {

class AllreduceUpcastHook : public Hook {
 public:
  static constexpr const char* kName = "allreduce_upcast";
  static constexpr HookListing kListing{
      kName,
      "sum float16/bfloat16 gradients, divide by world size, upcast into each parameter's "
      "float32 gradient (params[i].data)"};
  static constexpr uint32_t kFlags = DDPH_HOOK_NEEDS_PARAMS | DDPH_HOOK_RESULT_ELSEWHERE;
  static constexpr bool kRunsOnCuda = true;
  explicit AllreduceUpcastHook(const ddph_hook_init_t& init) : comm_(init.comm) {}

  void run(const ddph_bucket_t& bucket, DType dtype, const Completion& done) override {
    // float32 is accepted too (PyTorch casts nothing when param_dtype equals
    // reduce_dtype): then the "upcast" is a copy.
    DDPH_CHECK(dtype == DType::F16 || dtype == DType::BF16 || dtype == DType::F32, DDPH_UNSUPPORTED,
               kName << ": bucket dtype " << dtype_name(dtype)
                     << " is not supported (float16 or bfloat16 gradients; float32 is copied)");
    DDPH_CHECK(bucket.num_params > 0, DDPH_INVALID_ARGUMENT,
               kName << ": bucket " << bucket.index
                     << " has no parameter views (bucket.num_params is 0), so the float32 "
                        "gradients have nowhere to go");
    // Every destination is checked before anything is sent.
    grads_.assign(bucket.num_params, nullptr);
    for (size_t i = 0; i < bucket.num_params; ++i)
      grads_[i] = param_f32_data(bucket, i, kName, "the parameter's float32 gradient",
                                 BucketMemory::kHostOrCuda);

    allreduce_bucket(comm_, bucket, dtype, DDPH_SUM);
    void* data = data_ptr(bucket.buffer);
    const Where at = where_of(bucket);
    divide_inplace(at, dtype, data, size_t(bucket.buffer.shape[0]), comm_size(comm_));

    for (size_t i = 0; i < bucket.num_params; ++i) {
      const ddph_param_t& p = bucket.params[i];
      const char* src = static_cast<const char*>(data) + size_t(p.offset) * dtype_size(dtype);
      cast_into(at, dtype, src, DType::F32, grads_[i], size_t(view_numel(p)));
    }
    done.ok();
  }

 private:
  ddph_comm_t* comm_;
  std::vector<float*> grads_;  // per-bucket scratch
};

}  // namespace

}  // namespace mixed_precision
}  // namespace ddph

DDPH_DEFINE_HOOK_PLUGIN("mixed_precision", "0.1.0",
                        &ddph::hook_table<ddph::mixed_precision::AllreduceUpcastHook>())
