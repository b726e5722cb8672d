// One optimizer step of one parameter, decided on the host: which loop (its
// template flags) and its float scalars. plan_step (functional_optim.h)
// makes it; the CPU loops and the CUDA kernels both run it through
// dispatch(), so the choice of loop is the same code for host and device.
#pragma once

#include <type_traits>

#include "core/optim/optim_math.h"

namespace ddph {
namespace optim {

struct StepPlan {
  bool adam = false;  // adam or adamw; else sgd
  bool maximize = false, decay = false;
  int momentum = 0;  // sgd: 0 none, 1 first step, 2 later
  bool nesterov = false;
  bool adamw = false, amsgrad = false;
  SgdScalars sgd{};
  AdamScalars adam_k{};
};

// The state a plan's loop reads: m (sgd's momentum_buffer or adam's
// exp_avg), v (exp_avg_sq) and vmax (max_exp_avg_sq); NULL where the plan
// has none.
struct SlotData {
  float* m;
  float* v;
  float* vmax;
};

template <bool M, bool D, int Mo, bool N>
struct SgdFlags {
  static constexpr bool kMaximize = M, kDecay = D, kNesterov = N;
  static constexpr int kMomentum = Mo;
};
template <bool M, bool W, bool D, bool A>
struct AdamFlags {
  static constexpr bool kMaximize = M, kAdamW = W, kDecay = D, kAmsgrad = A;
};

// Calls f(std::true_type) or f(std::false_type).
template <class F>
void with_flag(bool flag, F&& f) {
  if (flag)
    f(std::true_type{});
  else
    f(std::false_type{});
}

// Calls sgd(SgdFlags<...>{}) or adam(AdamFlags<...>{}) for plan's flags.
template <class Sgd, class Adam>
void dispatch(const StepPlan& plan, Sgd&& sgd, Adam&& adam) {
  with_flag(plan.maximize, [&](auto max) {
    with_flag(plan.decay, [&](auto decay) {
      constexpr bool M = decltype(max)::value, D = decltype(decay)::value;
      if (plan.adam) {
        with_flag(plan.adamw, [&](auto adamw) {
          with_flag(plan.amsgrad, [&](auto amsgrad) {
            adam(AdamFlags<M, decltype(adamw)::value, D, decltype(amsgrad)::value>{});
          });
        });
        return;
      }
      with_flag(plan.nesterov, [&](auto nesterov) {
        constexpr bool N = decltype(nesterov)::value;
        if (plan.momentum == 0)
          sgd(SgdFlags<M, D, 0, false>{});
        else if (plan.momentum == 1)
          sgd(SgdFlags<M, D, 1, N>{});
        else
          sgd(SgdFlags<M, D, 2, N>{});
      });
    });
  });
}

}  // namespace optim
}  // namespace ddph
