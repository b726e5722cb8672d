// PyTorch's fp16_compress_hook and bf16_compress_hook: cast to 16 bits,
// divide by the world size in that precision, allreduce SUM in 16 bits,
// cast back into the bucket. The cast and the divide are one pass.
#include "core/base/tensor.h"
#include "core/comm/comm_call.h"
#include "core/hook/hook.h"
#include "core/kernels/on_device.h"
#include "plugins/default/hooks.h"
#include "plugins/default/low_precision.h"

namespace ddph {
namespace default_family {
namespace {

template <DType Low>
class CompressHook : public Hook {
 public:
  // Its scratch per bucket index is a cache, not state (ABI 1.8).
  static constexpr uint32_t kFlags = DDPH_HOOK_STATELESS;
  static constexpr const char* kName = Low == DType::F16 ? "fp16_compress" : "bf16_compress";
  static constexpr HookListing kListing{
      kName, Low == DType::F16
                 ? "allreduce in float16: cast, divide by world size, sum, cast back"
                 : "allreduce in bfloat16: cast, divide by world size, sum, cast back"};
  // The casts run on the bucket's stream (core/kernels/on_device.h).
  static constexpr bool kRunsOnCuda = true;
  explicit CompressHook(const ddph_hook_init_t& init) : comm_(init.comm) {}

  void run(const ddph_bucket_t& bucket, DType dtype, const Completion& done) override {
    check_low_input(kName, dtype, Low);
    const int64_t n = bucket.buffer.shape[0];
    count_in(uint64_t(n) * dtype_size(dtype));
    if (dtype == Low) {  // already 16-bit: the plain divide-first mean
      FlatTensor buf(data_ptr(bucket.buffer), Low, n, bucket.buffer.device);
      count_out(uint64_t(n) * 2);
      comm_allreduce(comm_, buf, DDPH_AVG, bucket.stream);
    } else {
      reduce_low_copy(bucket, dtype, Low, comm_size(comm_), scratch_, [&](FlatTensor& buf) {
        count_out(uint64_t(n) * 2);
        comm_allreduce(comm_, buf, DDPH_SUM, bucket.stream);
      });
    }
    done.ok();
  }

 private:
  ddph_comm_t* comm_;
  ScratchBuffers scratch_;
};

}  // namespace

const ddph_hook_t& fp16_compress_hook() {
  return hook_table<CompressHook<DType::F16>>();
}

const ddph_hook_t& bf16_compress_hook() {
  return hook_table<CompressHook<DType::BF16>>();
}

}  // namespace default_family
}  // namespace ddph
