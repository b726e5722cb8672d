#include "core/optim/functional_optim.h"

#include <cmath>

#include "core/base/error.h"
#include "core/kernels/clones.h"

namespace ddph {
namespace optim {
namespace {

const char* slot_name(const OptimConfig& c, Slot slot) {
  switch (slot) {
    case Slot::kMomentum:
      return c.kind == OptimKind::kSgd ? "momentum_buffer" : "exp_avg";
    case Slot::kSecond:
      return "exp_avg_sq";
    case Slot::kMaxSecond:
      return "max_exp_avg_sq";
  }
  return "?";
}

// Buffers are created on the first step (torch: zeros_like, or sgd's
// clone of the first gradient); a loaded state must already fit.
bool ready(const OptimConfig& c, StateSlots& slots, Slot slot, size_t n) {
  const size_t have = slots.size(slot);
  if (have == 0) {
    slots.create(slot, n);
    return false;
  }
  DDPH_CHECK(have == n, DDPH_INVALID_ARGUMENT,
             c.who << ": the optimizer state holds " << have << " elements of "
                   << slot_name(c, slot) << " for a parameter of " << n
                   << " (a checkpoint of "
                      "another model?)");
  return true;
}

// The loops below are instantiated per option combination (dispatch), so
// they carry no branch per element and the compiler vectorizes them, and
// cloned per x86-64 level, picked at load time (DDPH_ISA_CLONES). Every
// clone rounds like scalar code: vector mul/add/div/sqrt are IEEE ops, and
// this file is built with -ffp-contract=off, so no multiply-add is fused.

template <bool kMaximize, bool kDecay, int kMomentum, bool kNesterov>
DDPH_ISA_CLONES void sgd_loop(const SgdScalars& k, float* __restrict p,
                              const float* __restrict grad, float* __restrict buf, size_t n) {
  for (size_t i = 0; i < n; ++i)
    sgd_element<kMaximize, kDecay, kMomentum, kNesterov>(k, p, grad, buf, i);
}

template <bool kMaximize, bool kAdamW, bool kDecay, bool kAmsgrad>
DDPH_ISA_CLONES void adam_loop(const AdamScalars& k, float* __restrict p,
                               const float* __restrict grad, float* __restrict m,
                               float* __restrict v, float* __restrict vmax, size_t n) {
  for (size_t i = 0; i < n; ++i)
    adam_element<kMaximize, kAdamW, kDecay, kAmsgrad>(k, p, grad, m, v, vmax, i);
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

StepPlan plan_step(const OptimConfig& c, uint64_t* step, StateSlots& slots, size_t n) {
  StepPlan plan;
  plan.maximize = c.maximize;
  plan.decay = c.weight_decay != 0;
  if (c.kind == OptimKind::kSgd) {
    plan.sgd = SgdScalars{float(c.weight_decay), float(c.momentum), float(1.0 - c.dampening),
                          float(-c.lr)};
    plan.momentum = c.momentum == 0 ? 0 : ready(c, slots, Slot::kMomentum, n) ? 2 : 1;
    plan.nesterov = c.nesterov;
    ++*step;
    return plan;
  }
  plan.adam = true;
  plan.adamw = c.kind == OptimKind::kAdamW;
  plan.amsgrad = c.amsgrad;
  ready(c, slots, Slot::kMomentum, n);
  ready(c, slots, Slot::kSecond, n);
  if (c.amsgrad) ready(c, slots, Slot::kMaxSecond, n);
  ++*step;
  const double t = double(*step);
  const double bias1 = 1 - std::pow(c.beta1, t);
  const double bias2 = 1 - std::pow(c.beta2, t);
  plan.adam_k = AdamScalars{
      float(-(c.lr / bias1)), float(std::sqrt(bias2)), float(c.beta1),
      float(c.beta2),         float(1 - c.beta1),      float(1 - c.beta2),
      float(c.eps),           float(c.weight_decay),   float(1 - c.lr * c.weight_decay)};
  return plan;
}

SlotData slot_data(const StepPlan& plan, StateSlots& slots) {
  SlotData d{nullptr, nullptr, nullptr};
  if (plan.adam || plan.momentum != 0) d.m = slots.data(Slot::kMomentum);
  if (plan.adam) d.v = slots.data(Slot::kSecond);
  if (plan.adam && plan.amsgrad) d.vmax = slots.data(Slot::kMaxSecond);
  return d;
}

void run_step_host(const StepPlan& plan, float* param, const float* grad, const SlotData& state,
                   size_t n) {
  dispatch(
      plan,
      [&](auto f) {
        using F = decltype(f);
        sgd_loop<F::kMaximize, F::kDecay, F::kMomentum, F::kNesterov>(plan.sgd, param, grad,
                                                                      state.m, n);
      },
      [&](auto f) {
        using F = decltype(f);
        adam_loop<F::kMaximize, F::kAdamW, F::kDecay, F::kAmsgrad>(plan.adam_k, param, grad,
                                                                   state.m, state.v, state.vmax, n);
      });
}

void optim_step(const OptimConfig& c, ParamState& state, float* param, const float* grad,
                size_t n) {
  HostSlots slots(state);
  const StepPlan plan = plan_step(c, &state.step, slots, n);
  run_step_host(plan, param, grad, slot_data(plan, slots), n);
}

}  // namespace optim
}  // namespace ddph
