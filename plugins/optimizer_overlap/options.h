// The options of hook_then_optimizer: their schema, and the validated
// optimizer settings a hook runs with. The checks are torch.optim's own
// (SGD, Adam, AdamW constructors), so a config PyTorch refuses is refused here.
#pragma once

#include <ddph/ddph.h>

#include <cstddef>
#include <string>
#include <vector>

#include "core/base/option_check.h"
#include "core/base/option_specs.h"
#include "core/optim/functional_optim.h"
#include "plugins/optimizer_overlap/param_groups.h"

namespace ddph {
namespace optimizer_overlap {

struct HookOptions {
  optim::OptimConfig optim;
  // Parameter indices to update, ascending (see param_select.h); empty: all.
  std::vector<size_t> params;
  // Parameters stepped with other options (param_groups.h); the rest use optim.
  std::vector<ParamGroup> groups;
};

OptionSpecs hook_specs();

// hook_then_optimizer's check_options, which create() runs before
// parse_options: throws DDPH_INVALID_ARGUMENT naming the option for what the
// schema cannot say: a beta of 1, nesterov without momentum or with
// dampening (torch.optim.SGD's rule), a malformed `params` list, a bad
// `param_groups` (param_groups.h).
void check_options(OptionCheck& c);

// Reads the values create() received (already checked by check_options).
HookOptions parse_options(const ddph_hook_init_t& init);

// "0,3,5" or "2-4,7" -> {0, 3, 5} / {2, 3, 4, 7}; "" -> {}. Throws
// DDPH_INVALID_ARGUMENT quoting the bad piece after `context`, which names
// the option (and the group) the list came from.
std::vector<size_t> parse_index_list(
    const std::string& text, const std::string& context = "hook_then_optimizer: option 'params'");

}  // namespace optimizer_overlap
}  // namespace ddph
