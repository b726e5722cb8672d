#include "plugins/powersgd/psgd_hook.h"

#include <string>
#include <utility>
#include <vector>

#include "core/base/tensor.h"
#include "core/memory/resident_floats.h"

namespace ddph {
namespace powersgd {

PsgdHook::PsgdHook(const ddph_hook_init_t& init, const char* name, HookKind kind,
                   std::unique_ptr<CompressionStep> step)
    : name_(name),
      kind_(kind),
      opts_(parse_options(init, kind == HookKind::kLayerwise)),
      comm_(init.comm, log_),
      warm_up_(opts_.start_iter),
      step_(std::move(step)) {
  rng_.seed_with(uint32_t(opts_.seed));
  step_->opened(opts_);
}

void PsgdHook::check_dtype(const ddph_bucket_t& bucket, DType dtype) const {
  char text[32];
  DDPH_CHECK(dtype == DType::F32 || dtype == DType::F16 || dtype == DType::BF16, DDPH_UNSUPPORTED,
             "powersgd/" << name_ << ": bucket dtype " << dl_dtype_text(bucket.buffer.dtype, text)
                         << " is not supported (float32, or float16/bfloat16 as the "
                            "fp16_wrapper/bf16_wrapper hand it)");
}

void PsgdHook::run(const ddph_bucket_t& bucket, DType dtype, const Completion& done) {
  check_dtype(bucket, dtype);
  const Where at = where_of(bucket);
  LowRankOps& ops = bind(at);
  {
    StepLog::Timer in_hook = log_.in_hook();
    const size_t n = size_t(bucket.buffer.shape[0]);
    count_in(n * dtype_size(dtype));
    void* data = data_ptr(bucket.buffer);
    if (n > 0 && warm_up_.covers(iter_)) {
      warm_up_.run(data, dtype, n, comm_, log_);
    } else if (n > 0) {
      WorkingCopy::Fp32 x = working_copy_.of(at, data, dtype, n);
      step_->compress(StepContext{bucket, dtype, name_, opts_, at, ops, memory_, comm_, log_, rng_},
                      x.data(), n);
      x.write_back();
      if (!opts_.warm_start) memory_.forget_factors();
    }
  }
  if (bucket.is_last) log_.finish_step(++iter_, name_);
  done.ok();
}

// ABI 1.10: the bucket's error (M minus the mean's estimate, this rank's,
// PyTorch's error_dict entry) goes into the bucket. The next step's mean
// over ranks then reduces what the last compressed means left out, as the
// next PowerSGD step would have. A batched error's padding is no gradient
// and goes. Without error feedback no error is kept.
void PsgdHook::take_residual(const ddph_bucket_t& bucket, DType dtype) {
  if (!opts_.error_feedback) return;
  check_dtype(bucket, dtype);
  const Where at = where_of(bucket);
  require_cuda_build(at, name_);
  const size_t n = size_t(bucket.buffer.shape[0]);
  std::vector<float> error;
  if (!memory_.take_error(bucket.index, step_->error_numel(n), name_, &error)) return;
  add_host_floats(at, dtype, data_ptr(bucket.buffer), error.data(), n, name_);
}

LowRankOps& PsgdHook::bind(const Where& at) {
  if (ops_.needs_gpu(at)) ops_.open_gpu(at);
  LowRankOps& ops = ops_.of(at);
  memory_.use(at, ops);
  ops.set_stream(at.stream);
  comm_.use(at, ops);
  return ops;
}

void PsgdHook::stats(ddph_stats_t* out) const {
  Hook::stats(out);
  out->bytes_out += log_.bytes_sent();  // every byte this hook sends goes through comm_
}

void PsgdHook::save_state(ddph_write_fn write, void* sink) {
  // Resident arrays are copied out (from a GPU: waiting for the steps
  // ordered before), so the blob is the CPU path's, byte for byte.
  PsgdState out;
  out.iter = iter_;
  out.rng = rng_;
  out.buckets = memory_.to_host();
  const std::string blob = encode_state(out, kind_);
  write(sink, blob.data(), blob.size());
}

void PsgdHook::load_state(const void* bytes, size_t n) {
  PsgdState loaded = decode_state(bytes, n, kind_);  // decoded in full first: all or nothing
  memory_.replace(std::move(loaded.buckets));        // the next step uploads the loaded values
  iter_ = loaded.iter;
  rng_ = loaded.rng;
}

}  // namespace powersgd
}  // namespace ddph
