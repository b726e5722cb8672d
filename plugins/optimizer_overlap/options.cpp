#include "plugins/optimizer_overlap/options.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>

#include "core/base/error.h"
#include "core/base/option_check.h"
#include "core/base/options.h"
#include "core/optim/optimizer_options.h"

namespace ddph {
namespace optimizer_overlap {
namespace {

constexpr const char* kHookName = "hook_then_optimizer";

}  // namespace

OptionSpecs hook_specs() {
  static const std::vector<ddph_option_spec_t> specs = optim::optimizer_specs({
      spec_string("params", "",
                  "parameters to update, e.g. \"0,2,5-7\": the host's parameter ids when it "
                  "gives them (bucket.param_ids), else indices counted over the buckets in index "
                  "order; empty: all"),
      spec_string("param_groups", "",
                  "torch.optim's parameter groups: \"1,3: weight_decay=0; 4-5: lr=0.01, "
                  "weight_decay=0\" steps parameters 1 and 3 without weight decay, 4 and 5 with "
                  "their own lr too (parameters as in 'params'; keys: lr, weight_decay, "
                  "maximize, momentum, dampening, nesterov, beta1, beta2, eps, amsgrad); the rest "
                  "use the hook's options"),
  });
  return specs;
}

std::vector<size_t> parse_index_list(const std::string& text, const std::string& context) {
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
                 context << ": '" << piece << "' in \"" << text
                         << "\" is not a parameter index or range (e.g. \"0,2,5-7\")");
      return size_t(v);
    };
    if (dash == std::string::npos) {
      out.push_back(number(piece));
    } else {
      const size_t first = number(piece.substr(0, dash)), last = number(piece.substr(dash + 1));
      DDPH_CHECK(first <= last && last - first < (size_t(1) << 24), DDPH_INVALID_ARGUMENT,
                 context << ": range '" << piece << "' is empty or too long");
      for (size_t k = first; k <= last; ++k) out.push_back(k);
    }
    pos = comma + 1;
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

void check_options(OptionCheck& c) {
  optim::check_optimizer_options(c, kHookName);
  std::vector<size_t> params;
  try {
    params = parse_index_list(c.options.get_string("params"));
  } catch (const Error&) {
    c.bad_option = "params";
    throw;
  }
  try {
    parse_param_groups(c.options.get_string("param_groups"),
                       optim::parse_optimizer(c.options, kHookName), params);
  } catch (const Error&) {
    c.bad_option = "param_groups";
    throw;
  }
}

HookOptions parse_options(const ddph_hook_init_t& init) {
  Options o(init.options, init.num_options);
  HookOptions h;
  h.optim = optim::parse_optimizer(o, kHookName);
  h.params = parse_index_list(o.get_string("params"));
  h.groups = parse_param_groups(o.get_string("param_groups"), h.optim, h.params);
  return h;
}

}  // namespace optimizer_overlap
}  // namespace ddph
