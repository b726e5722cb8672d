#include "tests/hardening/hardening_cases.h"

#include <cmath>

namespace ddph_test {

const std::vector<HookCase>& hook_cases() {
  // fp16: 2^-11 relative steps, bf16 2^-8, each rank's term and the sum
  // rounded; 8-bit quantization: half a step of (max - min) / 255 per rank.
  const double exact = 1e-7, fp16 = 4 * std::ldexp(1.0, -11), bf16 = 4 * std::ldexp(1.0, -8),
               uint8 = 4.0 / 255;
  static const std::vector<HookCase> cases = {
      {"allreduce", "  {family: default, name: allreduce}\n", NonFinite::kAsAllreduce, exact,
       false},
      {"fp16_compress", "  {family: default, name: fp16_compress}\n", NonFinite::kElementwise, fp16,
       false},
      {"bf16_compress", "  {family: default, name: bf16_compress}\n", NonFinite::kElementwise, bf16,
       false},
      {"fp16_wrapper",
       "  {family: default, name: fp16_wrapper, wrap: {family: default, name: allreduce}}\n",
       NonFinite::kElementwise, fp16, false},
      {"bf16_wrapper",
       "  {family: default, name: bf16_wrapper, wrap: {family: default, name: allreduce}}\n",
       NonFinite::kElementwise, bf16, false},
      {"noop", "  {family: debugging, name: noop}\n", NonFinite::kLocal, 0, false},
      {"per_tensor_allgather", "  {family: quantization, name: per_tensor}\n",
       NonFinite::kAsAllreduce, uint8, false},
      {"per_tensor_error",
       "  {family: quantization, name: per_tensor, options: {nonfinite: error}}\n",
       NonFinite::kReported, uint8, false},
      {"per_channel_allgather",
       "  {family: quantization, name: per_channel, options: {channel_size: 64}}\n",
       NonFinite::kAsAllreduce, uint8, false},
      {"per_channel_reduce_scatter",
       "  {family: quantization, name: per_channel,"
       " options: {protocol: reduce_scatter, channel_size: 64}}\n",
       NonFinite::kAsAllreduce, uint8, false},
      {"per_channel_reduce_scatter_error",
       "  {family: quantization, name: per_channel,"
       " options: {protocol: reduce_scatter, channel_size: 64, nonfinite: error}}\n",
       NonFinite::kReported, uint8, false},
      {"per_tensor_reduce_scatter_4bit_ef",
       "  {family: quantization, name: per_tensor,"
       " options: {protocol: reduce_scatter, bits: 4, error_feedback: true}}\n",
       NonFinite::kAsAllreduce, 4.0 / 15, false},
      // Compressed from the first step (start_iter 0 needs no memory across
      // steps); a 1-element matrix is not worth compressing and goes exact.
      // A matrix with NaN/Inf has unusable factors and is averaged
      // uncompressed (docs/powersgd.md); batched's one matrix is the bucket.
      {"powersgd",
       "  {family: powersgd, name: powersgd,"
       " options: {start_iter: 0, error_feedback: false, warm_start: false}}\n",
       NonFinite::kAllreduceInMatrix, exact, false},
      // rank 4: Householder QR instead of Gram-Schmidt.
      {"powersgd_rank4",
       "  {family: powersgd, name: powersgd,"
       " options: {rank: 4, start_iter: 0, error_feedback: false, warm_start: false}}\n",
       NonFinite::kAllreduceInMatrix, exact, false},
      {"batched_powersgd",
       "  {family: powersgd, name: batched_powersgd,"
       " options: {start_iter: 0, error_feedback: false, warm_start: false}}\n",
       NonFinite::kAsAllreduce, exact, false},
      {"hook_then_optimizer",
       "  {family: optimizer_overlap, name: hook_then_optimizer, options: {lr: 0.5},"
       " wrap: {family: default, name: allreduce}}\n",
       NonFinite::kAsAllreduce, exact, false, true},
      {"post_localsgd_global",
       "  {family: post_localsgd, name: post_localsgd, options: {start_localsgd_iter: 100}}\n",
       NonFinite::kAsAllreduce, exact, false},
      {"post_localsgd_local",
       "  {family: post_localsgd, name: post_localsgd,"
       " options: {start_localsgd_iter: 0, subgroup_size: 2}}\n",
       NonFinite::kAsAllreduce, exact, false},
      {"model_averaging",
       "  {family: post_localsgd, name: model_averaging, options: {period: 1},"
       " wrap: {family: post_localsgd, name: post_localsgd}}\n",
       NonFinite::kAsAllreduce, exact, false},
      {"allreduce_upcast", "  {family: mixed_precision, name: allreduce_upcast}\n",
       NonFinite::kElementwise, exact, true},
  };
  return cases;
}

std::string case_yaml(const HookCase& c) {
  return std::string("comm: {backend: gloo, timeout: 20s}\nhook:\n") + c.hook;
}

ViewBucket::ViewBucket(std::vector<float> values,
                       const std::vector<std::pair<int64_t, int64_t>>& shapes)
    : data(std::move(values)), param(data.size() > 0 ? data.size() : 1, 1.0f) {
  shape[0] = int64_t(data.size());
  if (data.empty()) data.push_back(0.0f);  // a valid pointer for an empty bucket
  b.struct_size = sizeof b;
  b.is_last = 1;
  b.buffer.data = data.data();
  b.buffer.device = {kDLCPU, 0};
  b.buffer.ndim = 1;
  b.buffer.dtype = {kDLFloat, 32, 1};
  b.buffer.shape = shape;
  view_shapes.reserve(shapes.size());  // views point into it
  views.resize(shapes.size());
  int64_t offset = 0;
  for (size_t i = 0; i < shapes.size(); ++i) {
    view_shapes.push_back({shapes[i].first, shapes[i].second});
    ddph_param_t& v = views[i];
    v.struct_size = sizeof v;
    v.offset = offset;
    v.ndim = 2;
    v.shape = view_shapes[i].data();
    v.data.data = param.data() + offset;
    v.data.device = {kDLCPU, 0};
    v.data.ndim = 2;
    v.data.dtype = {kDLFloat, 32, 1};
    v.data.shape = view_shapes[i].data();
    offset += shapes[i].first * shapes[i].second;
  }
  b.num_params = views.size();
  b.params = views.data();
}

float grad_value(int rank, size_t i) {
  uint32_t x = uint32_t(i) * 2654435761u ^ uint32_t(rank + 1) * 40503u;
  x ^= x >> 13;
  x *= 0x5bd1e995u;
  x ^= x >> 15;
  return float(x % 1000003u) / 1000003.0f * 4.0f - 2.0f;
}

}  // namespace ddph_test
