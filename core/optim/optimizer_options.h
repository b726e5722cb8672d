// The options of every hook that steps an optimizer (hook_then_optimizer
// and those to come), with torch.optim's names, defaults and checks (the
// SGD, Adam and AdamW constructors), so one config line means the same
// optimizer in each family and a config PyTorch refuses is refused.
#pragma once

#include <ddph/ddph.h>

#include <initializer_list>
#include <string>
#include <vector>

#include "core/base/option_check.h"
#include "core/base/options.h"
#include "core/optim/functional_optim.h"

namespace ddph {
namespace optim {

// optimizer, lr, weight_decay, maximize, momentum, dampening, nesterov,
// beta1, beta2, eps, amsgrad, then a family's own options `then`: the
// schema of a hook that steps an optimizer (kept by the family in a static,
// as its hook table points into it).
std::vector<ddph_option_spec_t> optimizer_specs(std::vector<ddph_option_spec_t> then = {});

// What the schema cannot say, as torch.optim refuses it: a beta of 1,
// nesterov without momentum or with dampening. Throws DDPH_INVALID_ARGUMENT
// naming the option and `who` (the hook, a literal).
void check_optimizer_options(OptionCheck& c, const char* who);

// A rule of torch.optim's constructors that a whole config breaks: option is
// the one at fault (a literal; NULL: none), what the rest of the sentence
// ("is 1; it must be in [0, 1)"). Besides check_optimizer_options' rules it
// checks the schema's bounds (lr, weight_decay, momentum, eps >= 0, betas in
// [0, 1)), for configs that never passed the schema: a parameter group's.
struct ConfigProblem {
  const char* option = nullptr;
  std::string what;
};
ConfigProblem find_config_problem(const OptimConfig& c);

// The optimizer the checked options describe; errors in its steps name `who`.
OptimConfig parse_optimizer(const Options& o, const char* who);

}  // namespace optim
}  // namespace ddph
