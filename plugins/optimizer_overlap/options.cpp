#include "plugins/optimizer_overlap/options.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>

#include "core/base/error.h"
#include "core/base/option_check.h"
#include "core/base/options.h"

namespace ddph {
namespace optimizer_overlap {
namespace {

constexpr double kHuge = 1e300;  // "no upper bound" for options bounded below only

}  // namespace

const ddph_option_spec_t* hook_specs(size_t* count) {
  static const ddph_option_spec_t specs[] = {
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
      spec_string("params", "",
                  "parameters to update, e.g. \"0,2,5-7\": the host's parameter ids when it "
                  "gives them (bucket.param_ids), else indices counted over the buckets in "
                  "index order; empty: all"),
  };
  *count = sizeof specs / sizeof specs[0];
  return specs;
}

std::vector<size_t> parse_index_list(const std::string& text) {
  std::vector<size_t> out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t comma = text.find(',', pos);
    if (comma == std::string::npos) comma = text.size();
    std::string piece = text.substr(pos, comma - pos);
    piece.erase(0, piece.find_first_not_of(' '));
    piece.erase(piece.find_last_not_of(' ') + 1);
    const size_t dash = piece.find('-', 1);
    auto number = [&](const std::string& s) {
      char* end = nullptr;
      errno = 0;
      const long long v = s.empty() ? -1 : std::strtoll(s.c_str(), &end, 10);
      DDPH_CHECK(!s.empty() && *end == '\0' && errno == 0 && v >= 0 && s[0] != '-' && s[0] != '+',
                 DDPH_INVALID_ARGUMENT,
                 "hook_then_optimizer: option 'params': '"
                     << piece << "' in \"" << text
                     << "\" is not a parameter index or range (e.g. \"0,2,5-7\")");
      return size_t(v);
    };
    if (dash == std::string::npos) {
      out.push_back(number(piece));
    } else {
      const size_t first = number(piece.substr(0, dash)), last = number(piece.substr(dash + 1));
      DDPH_CHECK(
          first <= last && last - first < (size_t(1) << 24), DDPH_INVALID_ARGUMENT,
          "hook_then_optimizer: option 'params': range '" << piece << "' is empty or too long");
      for (size_t k = first; k <= last; ++k) out.push_back(k);
    }
    pos = comma + 1;
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

void check_options(OptionCheck& c) {
  const Options& o = c.options;
  const std::string optimizer = o.get_string("optimizer");
  const double beta1 = o.get_float("beta1"), beta2 = o.get_float("beta2");
  const double momentum = o.get_float("momentum"), dampening = o.get_float("dampening");
  // The schema bounds betas to [0, 1]; torch.optim refuses 1 as well.
  DDPH_CHECK_OPTION(c, beta1 < 1, "beta1",
                    "hook_then_optimizer: option 'beta1' is " << beta1 << "; it must be in [0, 1)");
  DDPH_CHECK_OPTION(c, beta2 < 1, "beta2",
                    "hook_then_optimizer: option 'beta2' is " << beta2 << "; it must be in [0, 1)");
  // torch.optim.SGD: "Nesterov momentum requires a momentum and zero dampening".
  DDPH_CHECK_OPTION(
      c, !o.get_bool("nesterov") || (optimizer == "sgd" && momentum > 0 && dampening == 0),
      "nesterov",
      "hook_then_optimizer: option 'nesterov' needs optimizer sgd with momentum > 0 "
      "and dampening 0 (got optimizer "
          << optimizer << ", momentum " << momentum << ", dampening " << dampening
          << "), as torch.optim.SGD requires; set momentum above 0 and dampening "
             "to 0, or nesterov: false");
  try {
    parse_index_list(o.get_string("params"));
  } catch (const Error&) {
    c.bad_option = "params";
    throw;
  }
}

HookOptions parse_options(const ddph_hook_init_t& init) {
  Options o(init.options, init.num_options);
  HookOptions h;
  OptimConfig& c = h.optim;
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
  h.params = parse_index_list(o.get_string("params"));
  return h;
}

}  // namespace optimizer_overlap
}  // namespace ddph
