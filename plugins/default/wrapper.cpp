// PyTorch's fp16_compress_wrapper / bf16_compress_wrapper: hand the inner
// hook a 16-bit copy of the bucket, wait for it, cast its result back.
#include "core/base/tensor.h"
#include "core/hook/hook.h"
#include "core/kernels/on_device.h"
#include "plugins/default/hooks.h"
#include "plugins/default/low_precision.h"

namespace ddph {
namespace default_family {
namespace {

template <DType Low>
class WrapperHook : public Hook {
 public:
  // Stateless itself (ABI 1.8); the host checks the inner hook too.
  static constexpr uint32_t kFlags = DDPH_HOOK_NEEDS_INNER | DDPH_HOOK_STATELESS;
  static constexpr const char* kName = Low == DType::F16 ? "fp16_wrapper" : "bf16_wrapper";
  static constexpr HookListing kListing{
      kName, Low == DType::F16
                 ? "runs the wrapped hook on a float16 copy of the bucket, then casts back"
                 : "runs the wrapped hook on a bfloat16 copy of the bucket, then casts back"};
  // The casts run on the bucket's stream; the inner hook decides for itself.
  static constexpr bool kRunsOnCuda = true;
  // The inner hook gets 16-bit buckets: the loader checks it with that dtype.
  static void check_options(OptionCheck& c) { c.inner_bucket_dtype = dtype_to_dl(Low); }

  explicit WrapperHook(const ddph_hook_init_t& init) : inner_(*init.inner) {
    DDPH_CHECK(!(inner_.hook->flags & DDPH_HOOK_RESULT_ELSEWHERE), DDPH_UNSUPPORTED,
               kName << ": the inner hook '" << (inner_.hook->name ? inner_.hook->name : "?")
                     << "' does not leave its result in the bucket, so there is nothing to "
                        "cast back");
  }

  void run(const ddph_bucket_t& bucket, DType dtype, const Completion& done) override {
    check_low_input(kName, dtype, Low);
    const int64_t n = bucket.buffer.shape[0];
    count_in(uint64_t(n) * dtype_size(dtype));
    if (dtype == Low) {
      run_hook_blocking(inner_, bucket);
      done.ok();
      return;
    }
    reduce_low_copy(bucket, dtype, Low, /*divide_by=*/0, scratch_, [&](FlatTensor& buf) {
      run_hook_blocking(inner_, bucket_over(bucket, *buf.dl()));
    });
    done.ok();
  }

  // What reaches the wire is the inner hook's business: report its bytes out
  // (bytes in stay the full-precision bytes handed to this wrapper).
  void stats(ddph_stats_t* out) const override {
    Hook::stats(out);
    take_inner_bytes_out(inner_, out);
  }

 private:
  ddph_hook_ref_t inner_;
  ScratchBuffers scratch_;
};

}  // namespace

const ddph_hook_t& fp16_wrapper_hook() {
  return hook_table<WrapperHook<DType::F16>>();
}

const ddph_hook_t& bf16_wrapper_hook() {
  return hook_table<WrapperHook<DType::BF16>>();
}

}  // namespace default_family
}  // namespace ddph
