#include "plugins/optimizer_overlap/functional_optim.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace ddph {
namespace optimizer_overlap {
namespace {

// Buffers are created on the first step (torch: zeros_like, or sgd's
// clone of the first gradient); a loaded state must already fit.
bool ready(std::vector<float>& v, size_t n, const char* what) {
  if (v.empty()) {
    v.assign(n, 0.f);
    return false;
  }
  DDPH_CHECK(v.size() == n, DDPH_INVALID_ARGUMENT,
             "hook_then_optimizer: the optimizer state holds "
                 << v.size() << " elements of " << what << " for a parameter of " << n
                 << " (a checkpoint of "
                    "another model?)");
  return true;
}

// torch/optim/sgd.py, _single_tensor_sgd.
void sgd_step(const OptimConfig& c, ParamState& s, float* p, const float* grad, size_t n) {
  const float wd = float(c.weight_decay), mu = float(c.momentum);
  const float keep = float(1.0 - c.dampening), neg_lr = float(-c.lr);
  const bool use_momentum = c.momentum != 0;
  const bool had_buffer = use_momentum && ready(s.momentum, n, "momentum_buffer");
  float* buf = s.momentum.data();
  for (size_t i = 0; i < n; ++i) {
    float d = c.maximize ? -grad[i] : grad[i];
    if (c.weight_decay != 0) d = d + wd * p[i];
    if (use_momentum) {
      // First step: buf = clone(d_p); then buf = buf * mu + (1 - dampening) * d_p.
      buf[i] = had_buffer ? buf[i] * mu + keep * d : d;
      d = c.nesterov ? d + mu * buf[i] : buf[i];
    }
    p[i] = p[i] + neg_lr * d;
  }
  ++s.step;
}

// torch/optim/adam.py _single_tensor_adam and adamw.py _single_tensor_adamw
// (capturable=False): they differ only in where the weight decay goes.
void adam_step(const OptimConfig& c, ParamState& s, float* p, const float* grad, size_t n) {
  ready(s.momentum, n, "exp_avg");
  ready(s.second, n, "exp_avg_sq");
  if (c.amsgrad) ready(s.max_second, n, "max_exp_avg_sq");
  ++s.step;
  const double step = double(s.step);
  const double bias1 = 1 - std::pow(c.beta1, step);
  const double bias2 = 1 - std::pow(c.beta2, step);
  const float neg_step_size = float(-(c.lr / bias1));
  const float bias2_sqrt = float(std::sqrt(bias2));
  const float b1 = float(c.beta1), b2 = float(c.beta2);
  const float one_minus_b1 = float(1 - c.beta1), one_minus_b2 = float(1 - c.beta2);
  const float eps = float(c.eps), wd = float(c.weight_decay);
  const float decay = float(1 - c.lr * c.weight_decay);  // adamw: param.mul_(1 - lr * wd)
  const bool adamw = c.kind == OptimKind::kAdamW;
  float* m = s.momentum.data();
  float* v = s.second.data();
  float* vmax = c.amsgrad ? s.max_second.data() : nullptr;
  for (size_t i = 0; i < n; ++i) {
    float g = c.maximize ? -grad[i] : grad[i];
    if (adamw)
      p[i] = p[i] * decay;
    else if (c.weight_decay != 0)
      g = g + wd * p[i];
    m[i] = m[i] * b1 + one_minus_b1 * g;
    v[i] = v[i] * b2 + one_minus_b2 * g * g;  // addcmul_: value * t1 * t2, left to right
    float second = v[i];
    if (vmax != nullptr) second = vmax[i] = std::max(vmax[i], v[i]);
    const float denom = std::sqrt(second) / bias2_sqrt + eps;
    p[i] = p[i] + neg_step_size * m[i] / denom;  // addcdiv_: value * t1 / t2
  }
}

}  // namespace

const char* optim_name(OptimKind kind) {
  switch (kind) {
    case OptimKind::kSgd:
      return "sgd";
    case OptimKind::kAdam:
      return "adam";
    case OptimKind::kAdamW:
      return "adamw";
  }
  return "?";
}

void optim_step(const OptimConfig& c, ParamState& state, float* param, const float* grad,
                size_t n) {
  if (c.kind == OptimKind::kSgd)
    sgd_step(c, state, param, grad, n);
  else
    adam_step(c, state, param, grad, n);
}

}  // namespace optimizer_overlap
}  // namespace ddph
