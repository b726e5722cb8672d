#include "core/optim/optimizer_options.h"

#include <sstream>
#include <string>
#include <utility>

#include "core/base/error.h"

namespace ddph {
namespace optim {
namespace {

constexpr double kHuge = 1e300;  // "no upper bound" for options bounded below only

}  // namespace

std::vector<ddph_option_spec_t> optimizer_specs() {
  return {
      spec_string("optimizer", "sgd", "the functional optimizer run after the inner hook",
                  "sgd|adam|adamw"),
      spec_float("lr", "0.001", "learning rate", 0, kHuge),
      spec_float("weight_decay", "0", "L2 penalty (sgd, adam) or decoupled decay (adamw)", 0,
                 kHuge),
      spec_bool("maximize", "false", "maximize the objective instead of minimizing it"),
      spec_float("momentum", "0", "sgd: momentum factor", 0, kHuge),
      spec_float("dampening", "0", "sgd: dampening for momentum", -kHuge, kHuge),
      spec_bool("nesterov", "false", "sgd: Nesterov momentum (needs momentum > 0, dampening 0)"),
      spec_float("beta1", "0.9", "adam/adamw: betas[0], decay of the gradient's running mean", 0,
                 1),
      spec_float("beta2", "0.999", "adam/adamw: betas[1], decay of its running square", 0, 1),
      spec_float("eps", "1e-8", "adam/adamw: added to the denominator", 0, kHuge),
      spec_bool("amsgrad", "false", "adam/adamw: use the running maximum of the second moment"),
  };
}

std::vector<ddph_option_spec_t> optimizer_specs(std::initializer_list<ddph_option_spec_t> own) {
  std::vector<ddph_option_spec_t> specs = optimizer_specs();
  specs.insert(specs.end(), own);
  return specs;
}

ConfigProblem find_config_problem(const OptimConfig& c) {
  std::ostringstream what;
  auto problem = [&](const char* option) { return ConfigProblem{option, what.str()}; };
  // Written as !(x >= 0) so that NaN is refused too.
  const std::pair<const char*, double> at_least_zero[] = {
      {"lr", c.lr}, {"weight_decay", c.weight_decay}, {"momentum", c.momentum}, {"eps", c.eps}};
  for (const auto& [name, value] : at_least_zero) {
    if (value >= 0) continue;
    what << "is " << value << "; it must be >= 0";
    return problem(name);
  }
  // The schema bounds betas to [0, 1]; torch.optim refuses 1 as well.
  if (!(c.beta1 >= 0 && c.beta1 < 1)) {
    what << "is " << c.beta1 << "; it must be in [0, 1)";
    return problem("beta1");
  }
  if (!(c.beta2 >= 0 && c.beta2 < 1)) {
    what << "is " << c.beta2 << "; it must be in [0, 1)";
    return problem("beta2");
  }
  // torch.optim.SGD: "Nesterov momentum requires a momentum and zero dampening".
  if (c.nesterov && !(c.kind == OptimKind::kSgd && c.momentum > 0 && c.dampening == 0)) {
    what << "needs optimizer sgd with momentum > 0 and dampening 0 (got optimizer "
         << optim_name(c.kind) << ", momentum " << c.momentum << ", dampening " << c.dampening
         << "), as torch.optim.SGD requires; set momentum above 0 and dampening to 0, or "
            "nesterov: false";
    return problem("nesterov");
  }
  return {};
}

void check_optimizer_options(OptionCheck& c, const char* who) {
  const ConfigProblem p = find_config_problem(parse_optimizer(c.options, who));
  DDPH_CHECK_OPTION(c, p.option == nullptr, p.option,
                    who << ": option '" << p.option << "' " << p.what);
}

OptimConfig parse_optimizer(const Options& o, const char* who) {
  OptimConfig c;
  c.who = who;
  const std::string name = o.get_string("optimizer");
  c.kind = name == "adam"    ? OptimKind::kAdam
           : name == "adamw" ? OptimKind::kAdamW
                             : OptimKind::kSgd;
  c.lr = o.get_float("lr");
  c.weight_decay = o.get_float("weight_decay");
  c.maximize = o.get_bool("maximize");
  c.momentum = o.get_float("momentum");
  c.dampening = o.get_float("dampening");
  c.nesterov = o.get_bool("nesterov");
  c.beta1 = o.get_float("beta1");
  c.beta2 = o.get_float("beta2");
  c.eps = o.get_float("eps");
  c.amsgrad = o.get_bool("amsgrad");
  return c;
}

}  // namespace optim
}  // namespace ddph
