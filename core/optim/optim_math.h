// The per-element updates of the functional optimizers, shared by the CPU
// loops (functional_optim.cpp) and the CUDA kernels (cuda/optim_cuda.cu), so
// both compute the same float operations in the same order and give the same
// bits. Only plain float operations: both sides are built without fused
// multiply-adds (-ffp-contract=off, --fmad=false), and sqrtf and `/` are
// IEEE-rounded on both (nvcc's defaults, -prec-sqrt/-prec-div=true).
//
// Scalars are formed on the host in double and rounded to float where torch
// rounds them (plan_step in functional_optim.h); the flags are template
// parameters so the loops carry no branch per element.
#pragma once

#include <math.h>
#include <stddef.h>

#include "core/kernels/scalar.h"  // DDPH_HD

namespace ddph {
namespace optim {

struct SgdScalars {
  float wd, mu, keep, neg_lr;
};

struct AdamScalars {
  float neg_step_size, bias2_sqrt, b1, b2, one_minus_b1, one_minus_b2, eps, wd, decay;
};

// torch/optim/sgd.py, _single_tensor_sgd. kMomentum: 0 none, 1 the first
// step (buf = clone(d_p)), 2 later steps (buf = buf * mu + (1 - dampening) * d_p).
template <bool kMaximize, bool kDecay, int kMomentum, bool kNesterov>
DDPH_HD inline void sgd_element(const SgdScalars& k, float* __restrict p,
                                const float* __restrict grad, float* __restrict buf, size_t i) {
  float d = kMaximize ? -grad[i] : grad[i];
  if (kDecay) d = d + k.wd * p[i];
  if (kMomentum != 0) {
    const float b = kMomentum == 1 ? d : buf[i] * k.mu + k.keep * d;
    buf[i] = b;
    d = kNesterov ? d + k.mu * b : b;
  }
  p[i] = p[i] + k.neg_lr * d;
}

// torch/optim/adam.py _single_tensor_adam and adamw.py _single_tensor_adamw
// (capturable=False): they differ only in where the weight decay goes.
template <bool kMaximize, bool kAdamW, bool kDecay, bool kAmsgrad>
DDPH_HD inline void adam_element(const AdamScalars& k, float* __restrict p,
                                 const float* __restrict grad, float* __restrict m,
                                 float* __restrict v, float* __restrict vmax, size_t i) {
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
  const float denom = sqrtf(second) / k.bias2_sqrt + k.eps;
  p[i] = p[i] + k.neg_step_size * mi / denom;  // addcdiv_: value * t1 / t2
}

}  // namespace optim
}  // namespace ddph
