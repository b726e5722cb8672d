// Functional optimizers: torch.optim's single-tensor updates (SGD, Adam,
// AdamW in PyTorch 1.13: torch/optim/sgd.py, adam.py, adamw.py), one
// parameter at a time, with the state kept by the caller. Scalars are
// formed in double and rounded to float where torch rounds them, and the
// tensor ops run in float32 in torch's order, so an update equals torch's
// to float32 rounding (torch's vectorized kernels may fuse a multiply-add).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/optim/optim_plan.h"

namespace ddph {
namespace optim {

enum class OptimKind : uint32_t { kSgd = 0, kAdam = 1, kAdamW = 2 };

const char* optim_name(OptimKind kind);

struct OptimConfig {
  // The hook that runs the optimizer (a literal), named in its errors.
  const char* who = "optimizer";
  OptimKind kind = OptimKind::kSgd;
  double lr = 1e-3;
  // sgd
  double momentum = 0, dampening = 0;
  bool nesterov = false;
  // adam, adamw
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  bool amsgrad = false;
  // all
  double weight_decay = 0;
  bool maximize = false;
};

// One parameter's optimizer state, as torch keeps it in optimizer.state[p].
// Empty vectors are torch's "not created yet" (sgd's momentum_buffer None).
struct ParamState {
  uint64_t step = 0;              // adam/adamw: state['step']; sgd counts too
  std::vector<float> momentum;    // sgd: momentum_buffer; adam: exp_avg
  std::vector<float> second;      // adam: exp_avg_sq
  std::vector<float> max_second;  // adam with amsgrad: max_exp_avg_sq
};

// The state tensors of one parameter, wherever they live: ParamState's host
// vectors (HostSlots) or device memory (DeviceSlots, a CUDA bucket's). Size 0 is
// torch's "not created yet".
enum class Slot { kMomentum = 0, kSecond = 1, kMaxSecond = 2 };
class StateSlots {
 public:
  virtual ~StateSlots() = default;
  virtual size_t size(Slot slot) const = 0;
  // Makes slot n zeros (torch's zeros_like; sgd's first buffer is then
  // overwritten by the clone of the gradient).
  virtual void create(Slot slot, size_t n) = 0;
  virtual float* data(Slot slot) = 0;
};

// ParamState's vectors as slots.
class HostSlots : public StateSlots {
 public:
  explicit HostSlots(ParamState& s) : s_(s) {}
  size_t size(Slot slot) const override { return vec(slot).size(); }
  void create(Slot slot, size_t n) override { vec(slot).assign(n, 0.f); }
  float* data(Slot slot) override { return vec(slot).data(); }

 private:
  std::vector<float>& vec(Slot slot) const {
    return slot == Slot::kMomentum ? s_.momentum
           : slot == Slot::kSecond ? s_.second
                                   : s_.max_second;
  }
  ParamState& s_;
};

// The host half of a step, for host and device state alike: creates the
// slots this step needs (as torch does on its first step), advances *step,
// and returns the loop to run with its scalars. Throws
// DDPH_INVALID_ARGUMENT when a slot holds buffers of another length (a
// checkpoint of another model).
StepPlan plan_step(const OptimConfig& c, uint64_t* step, StateSlots& slots, size_t n);

// The slot pointers plan's loop reads (optim_plan.h).
SlotData slot_data(const StepPlan& plan, StateSlots& slots);

// Runs plan over host memory: param[0..n) -= the update for grad[0..n).
// param and grad must not overlap.
void run_step_host(const StepPlan& plan, float* param, const float* grad, const SlotData& state,
                   size_t n);

// plan_step, then run_step_host, on host state.
void optim_step(const OptimConfig& c, ParamState& state, float* param, const float* grad, size_t n);

}  // namespace optim
}  // namespace ddph
