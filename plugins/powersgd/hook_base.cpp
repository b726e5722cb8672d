#include "plugins/powersgd/hook_base.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>

#include "core/comm_call.h"
#include "core/host.h"
#include "core/kernels/cast.h"
#include "core/tensor.h"

namespace ddph {
namespace powersgd {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

PsgdHook::PsgdHook(const ddph_hook_init_t& init, const char* name, HookKind kind)
    : name_(name),
      comm_(init.comm),
      world_(comm_size(init.comm)),
      opts_(parse_options(init, name, kind == HookKind::kLayerwise)),
      kind_(kind) {
  state_.rng.seed_with(uint32_t(opts_.seed));
}

void PsgdHook::run(const ddph_bucket_t& bucket, DType dtype, const Completion& done) {
  char text[32];
  DDPH_CHECK(dtype == DType::F32 || dtype == DType::F16 || dtype == DType::BF16, DDPH_UNSUPPORTED,
             "powersgd/" << name_ << ": bucket dtype " << dl_dtype_text(bucket.buffer.dtype, text)
                         << " is not supported (float32, or float16/bfloat16 as the "
                            "fp16_wrapper/bf16_wrapper hand it)");
  DDPH_CHECK(bucket.buffer.device.device_type == kDLCPU, DDPH_UNSUPPORTED,
             "powersgd/" << name_ << ": bucket on device type "
                         << int(bucket.buffer.device.device_type)
                         << " is not supported (host memory, kDLCPU, only)");
  const auto t0 = std::chrono::steady_clock::now();
  const size_t n = size_t(bucket.buffer.shape[0]);
  count_in(n * dtype_size(dtype));
  void* data = data_ptr(bucket.buffer);
  if (n > 0 && state_.iter < opts_.start_iter) {
    // PyTorch's allreduce_hook: divide first, then sum (DDPH_AVG).
    FlatTensor buf(data, dtype, int64_t(n));
    count_out(n * dtype_size(dtype));
    count_compression(n, n, dtype);
    const auto c0 = std::chrono::steady_clock::now();
    comm_allreduce(comm_, buf, DDPH_AVG, nullptr);
    step_comm_s_ += seconds_since(c0);
  } else if (n > 0) {
    float* x = static_cast<float*>(data);
    if (dtype != DType::F32) {
      work_.resize(n);
      cast_into(dtype, data, DType::F32, work_.data(), n);
      x = work_.data();
    }
    compress(bucket, x, n, dtype);
    if (dtype != DType::F32) cast_into(DType::F32, x, dtype, data, n);
    // PyTorch clears every bucket's P and Q after each step without warm start.
    if (!opts_.warm_start)
      for (auto& kv : state_.buckets) {
        kv.second.has_pq = false;
        kv.second.p.clear();
        kv.second.q.clear();
      }
  }
  step_total_s_ += seconds_since(t0);
  finish_step(bucket);
  done.ok();
}

void PsgdHook::finish_step(const ddph_bucket_t& bucket) {
  if (!bucket.is_last) return;
  ++state_.iter;
  if (step_before_ > 0) {
    char text[256];
    std::snprintf(text, sizeof text,
                  "%s: step %llu: %llu bytes before compression, %llu after; %.3f ms compressing, "
                  "%.3f ms in collectives",
                  name_, (unsigned long long)state_.iter, (unsigned long long)step_before_,
                  (unsigned long long)step_after_, 1e3 * (step_total_s_ - step_comm_s_),
                  1e3 * step_comm_s_);
    log(DDPH_LOG_DEBUG, "powersgd", text);
  }
  step_before_ = step_after_ = 0;
  step_total_s_ = step_comm_s_ = 0;
}

float* PsgdHook::error_buffer(uint64_t index, size_t n) {
  std::vector<float>& e = state_.buckets[index].error;
  if (e.empty()) e.assign(n, 0.0f);
  DDPH_CHECK(e.size() == n, DDPH_INVALID_ARGUMENT,
             "powersgd/" << name_ << ": bucket " << index << " has an error buffer of " << e.size()
                         << " floats (from a checkpoint or an earlier layout), but needs " << n);
  return e.data();
}

void PsgdHook::check_memory(const std::vector<float>& v, size_t want, uint64_t index,
                            const char* what) {
  DDPH_CHECK(v.size() == want, DDPH_INVALID_ARGUMENT,
             "powersgd/" << name_ << ": bucket " << index << " remembers " << v.size()
                         << " floats of " << what << " (from a checkpoint or an earlier layout), "
                         << "but its layout at rank " << opts_.rank << " needs " << want);
}

void PsgdHook::allreduce_sum(float* x, size_t n, DType wire) {
  if (n == 0) return;
  count_out(n * dtype_size(wire));
  const auto c0 = std::chrono::steady_clock::now();
  if (wire == DType::F32) {
    FlatTensor buf(x, DType::F32, int64_t(n));
    comm_allreduce(comm_, buf, DDPH_SUM, nullptr);
    step_comm_s_ += seconds_since(c0);
    return;
  }
  // Under fp16_wrapper/bf16_wrapper the factors travel in 16 bits, as they
  // do under PyTorch's wrappers; the products are computed in fp32.
  wire_scratch_.resize(n);
  cast_into(DType::F32, x, wire, wire_scratch_.data(), n);
  FlatTensor buf(wire_scratch_.data(), wire, int64_t(n));
  comm_allreduce(comm_, buf, DDPH_SUM, nullptr);
  step_comm_s_ += seconds_since(c0);
  cast_into(wire, wire_scratch_.data(), DType::F32, x, n);
}

void PsgdHook::count_compression(uint64_t numel_before, uint64_t numel_after, DType wire) {
  step_before_ += numel_before * dtype_size(wire);
  step_after_ += numel_after * dtype_size(wire);
}

void PsgdHook::save_state(ddph_write_fn write, void* sink) {
  const std::string blob = encode_state(state_, kind_);
  write(sink, blob.data(), blob.size());
}

void PsgdHook::load_state(const void* bytes, size_t n) {
  state_ = decode_state(bytes, n, kind_);  // decoded in full first: all or nothing
}

}  // namespace powersgd
}  // namespace ddph
