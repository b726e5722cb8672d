// PyTorch's _hook_then_optimizer: run the wrapped hook on the bucket, then,
// once its reduced gradient is in the bucket, step a functional optimizer on
// each parameter of the bucket in place. The step of an early bucket thus
// runs while the host still computes the backward of later layers, instead
// of in one optimizer pass after the whole backward.
#include <string>
#include <vector>

#include "core/hook.h"
#include "core/kernels/cast.h"
#include "core/param_view.h"
#include "core/tensor.h"
#include "plugins/optimizer_overlap/hooks.h"
#include "plugins/optimizer_overlap/options.h"
#include "plugins/optimizer_overlap/param_select.h"
#include "plugins/optimizer_overlap/state.h"

namespace ddph {
namespace optimizer_overlap {
namespace {

constexpr const char* kName = "hook_then_optimizer";

class HookThenOptimizer : public Hook {
 public:
  static constexpr uint32_t kFlags =
      DDPH_HOOK_NEEDS_INNER | DDPH_HOOK_NEEDS_PARAMS | DDPH_HOOK_STEPS_OPTIMIZER;

  explicit HookThenOptimizer(const ddph_hook_init_t& init)
      : inner_(*init.inner), options_(parse_options(init)), selection_(options_.params) {
    // Refused here rather than at the first bucket: the optimizer would
    // otherwise step on whatever the bucket holds, and train on it quietly.
    DDPH_CHECK(!(inner_.hook->flags & DDPH_HOOK_RESULT_ELSEWHERE), DDPH_UNSUPPORTED,
               kName << ": the wrapped hook '" << (inner_.hook->name ? inner_.hook->name : "?")
                     << "' does not leave the reduced gradient in the bucket buffer "
                        "(DDPH_HOOK_RESULT_ELSEWHERE), so there is no gradient to step the "
                        "optimizer with; wrap a hook whose result lands in the bucket, e.g. "
                        "default/allreduce");
  }

  void run(const ddph_bucket_t& bucket, DType dtype, const Completion& done) override {
    DDPH_CHECK(dtype == DType::F32 || dtype == DType::F16 || dtype == DType::BF16, DDPH_UNSUPPORTED,
               kName << ": bucket dtype " << dtype_name(dtype)
                     << " is not supported (float32, float16, bfloat16 gradients)");
    // Everything the step needs is checked before any byte is sent, so a
    // bad bucket is refused on every rank alike instead of failing midway.
    selection_.select(bucket, &selected_);
    params_.assign(bucket.num_params, nullptr);
    for (size_t i = 0; i < bucket.num_params; ++i)
      if (selected_[i])
        params_[i] = param_f32_data(bucket, i, kName, "the parameter (its own tensor)");
    count_in(uint64_t(bucket.buffer.shape[0]) * dtype_size(dtype));

    run_hook_blocking(inner_, bucket);

    const char* grads = static_cast<const char*>(data_ptr(bucket.buffer));
    const int64_t* ids = param_ids(bucket);
    for (size_t i = 0; i < bucket.num_params; ++i) {
      if (!selected_[i]) continue;
      const ddph_param_t& p = bucket.params[i];
      const size_t n = size_t(view_numel(p));
      const void* g = grads + size_t(p.offset) * dtype_size(dtype);
      const float* grad = static_cast<const float*>(g);
      if (dtype != DType::F32) {  // a low-precision bucket steps fp32 parameters
        upcast_.resize(n);
        cast_into(dtype, g, DType::F32, upcast_.data(), n);
        grad = upcast_.data();
      }
      const ParamKey key =
          ids != nullptr ? ParamKey::id(ids[i]) : ParamKey::position(bucket.index, uint32_t(i));
      optim_step(options_.optim, states_[key], params_[i], grad, n);
    }
    done.ok();
  }

  void save_state(ddph_write_fn write, void* sink) override {
    const std::string blob = encode_state(states_, options_.optim.kind);
    write(sink, blob.data(), blob.size());
  }

  void load_state(const void* bytes, size_t n) override {
    states_ = decode_state(bytes, n, options_.optim.kind);  // decoded whole, then swapped in
  }

  void stats(ddph_stats_t* out) const override {
    Hook::stats(out);
    take_inner_bytes_out(inner_, out);
  }

 private:
  ddph_hook_ref_t inner_;
  HookOptions options_;
  ParamSelection selection_;
  StateMap states_;
  // Per-bucket scratch, kept to allocate nothing in steady state.
  std::vector<char> selected_;
  std::vector<float*> params_;
  std::vector<float> upcast_;
};

}  // namespace

const ddph_hook_t& hook_then_optimizer_hook() {
  static const ddph_hook_t table = [] {
    size_t n = 0;
    const ddph_option_spec_t* specs = hook_specs(&n);
    return hook_table<HookThenOptimizer>(
        kName,
        "runs the wrapped hook, then steps sgd/adam/adamw on the bucket's parameters in place",
        specs, n, /*keeps_state=*/true);
  }();
  return table;
}

}  // namespace optimizer_overlap
}  // namespace ddph
