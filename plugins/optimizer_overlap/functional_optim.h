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

namespace ddph {
namespace optimizer_overlap {

enum class OptimKind : uint32_t { kSgd = 0, kAdam = 1, kAdamW = 2 };

const char* optim_name(OptimKind kind);

struct OptimConfig {
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

// param[0..n) -= the update for grad[0..n), advancing state. param and grad
// must not overlap. Throws DDPH_INVALID_ARGUMENT when the state holds
// buffers of another length (a checkpoint of another model).
void optim_step(const OptimConfig& c, ParamState& state, float* param, const float* grad, size_t n);

}  // namespace optimizer_overlap
}  // namespace ddph
