#include "plugins/optimizer_overlap/functional_optim.h"

#include <cmath>
#include <type_traits>

#include "core/error.h"
#include "core/kernels/clones.h"

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

// The loops below are instantiated per option combination (with_flag), so
// they carry no branch per element and the compiler vectorizes them, and
// cloned per x86-64 level, picked at load time (DDPH_ISA_CLONES). Every
// clone rounds like scalar code: vector mul/add/div/sqrt are IEEE ops, and
// this file is built with -ffp-contract=off, so no multiply-add is fused.

// Calls f(std::true_type) or f(std::false_type).
template <class F>
void with_flag(bool flag, F&& f) {
  if (flag)
    f(std::true_type{});
  else
    f(std::false_type{});
}

struct SgdScalars {
  float wd, mu, keep, neg_lr;
};

// torch/optim/sgd.py, _single_tensor_sgd. kMomentum: 0 none, 1 the first
// step (buf = clone(d_p)), 2 later steps (buf = buf * mu + (1 - dampening) * d_p).
template <bool kMaximize, bool kDecay, int kMomentum, bool kNesterov>
DDPH_ISA_CLONES void sgd_loop(const SgdScalars& k, float* __restrict p,
                                const float* __restrict grad, float* __restrict buf, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    float d = kMaximize ? -grad[i] : grad[i];
    if (kDecay) d = d + k.wd * p[i];
    if (kMomentum != 0) {
      const float b = kMomentum == 1 ? d : buf[i] * k.mu + k.keep * d;
      buf[i] = b;
      d = kNesterov ? d + k.mu * b : b;
    }
    p[i] = p[i] + k.neg_lr * d;
  }
}

void sgd_step(const OptimConfig& c, ParamState& s, float* p, const float* grad, size_t n) {
  const SgdScalars k{float(c.weight_decay), float(c.momentum), float(1.0 - c.dampening),
                     float(-c.lr)};
  const bool use_momentum = c.momentum != 0;
  const int momentum = !use_momentum ? 0 : ready(s.momentum, n, "momentum_buffer") ? 2 : 1;
  float* buf = s.momentum.data();
  with_flag(c.maximize, [&](auto max) {
    with_flag(c.weight_decay != 0, [&](auto decay) {
      with_flag(c.nesterov, [&](auto nesterov) {
        constexpr bool M = decltype(max)::value, D = decltype(decay)::value,
                       N = decltype(nesterov)::value;
        if (momentum == 0)
          sgd_loop<M, D, 0, false>(k, p, grad, buf, n);
        else if (momentum == 1)
          sgd_loop<M, D, 1, N>(k, p, grad, buf, n);
        else
          sgd_loop<M, D, 2, N>(k, p, grad, buf, n);
      });
    });
  });
  ++s.step;
}

struct AdamScalars {
  float neg_step_size, bias2_sqrt, b1, b2, one_minus_b1, one_minus_b2, eps, wd, decay;
};

// torch/optim/adam.py _single_tensor_adam and adamw.py _single_tensor_adamw
// (capturable=False): they differ only in where the weight decay goes.
template <bool kMaximize, bool kAdamW, bool kDecay, bool kAmsgrad>
DDPH_ISA_CLONES void adam_loop(const AdamScalars& k, float* __restrict p,
                                 const float* __restrict grad, float* __restrict m,
                                 float* __restrict v, float* __restrict vmax, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    float g = kMaximize ? -grad[i] : grad[i];
    if (kAdamW)
      p[i] = p[i] * k.decay;  // param.mul_(1 - lr * weight_decay)
    else if (kDecay)
      g = g + k.wd * p[i];
    const float mi = m[i] * k.b1 + k.one_minus_b1 * g;
    const float vi = v[i] * k.b2 + k.one_minus_b2 * g * g;  // addcmul_: value * t1 * t2
    m[i] = mi;
    v[i] = vi;
    float second = vi;
    if (kAmsgrad) second = vmax[i] = vmax[i] < vi ? vi : vmax[i];  // torch.maximum
    const float denom = std::sqrt(second) / k.bias2_sqrt + k.eps;
    p[i] = p[i] + k.neg_step_size * mi / denom;  // addcdiv_: value * t1 / t2
  }
}

void adam_step(const OptimConfig& c, ParamState& s, float* p, const float* grad, size_t n) {
  ready(s.momentum, n, "exp_avg");
  ready(s.second, n, "exp_avg_sq");
  if (c.amsgrad) ready(s.max_second, n, "max_exp_avg_sq");
  ++s.step;
  const double step = double(s.step);
  const double bias1 = 1 - std::pow(c.beta1, step);
  const double bias2 = 1 - std::pow(c.beta2, step);
  const AdamScalars k{
      float(-(c.lr / bias1)), float(std::sqrt(bias2)), float(c.beta1),
      float(c.beta2),         float(1 - c.beta1),      float(1 - c.beta2),
      float(c.eps),           float(c.weight_decay),   float(1 - c.lr * c.weight_decay)};
  float* vmax = c.amsgrad ? s.max_second.data() : nullptr;
  with_flag(c.maximize, [&](auto max) {
    with_flag(c.kind == OptimKind::kAdamW, [&](auto adamw) {
      with_flag(c.weight_decay != 0, [&](auto decay) {
        with_flag(c.amsgrad, [&](auto amsgrad) {
          adam_loop<decltype(max)::value, decltype(adamw)::value, decltype(decay)::value,
                    decltype(amsgrad)::value>(k, p, grad, s.momentum.data(), s.second.data(), vmax,
                                              n);
        });
      });
    });
  });
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
