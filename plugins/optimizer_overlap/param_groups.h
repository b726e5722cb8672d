// The `param_groups` option: torch.optim's parameter groups, each a set of
// parameters (in `params`' syntax: ids or positions, see param_select.h)
// stepped with some of the hook's optimizer options overridden, e.g. no
// weight decay on biases and norms:
//
//   param_groups: "1,3: weight_decay=0; 4-5: lr=0.01, weight_decay=0"
//
// Groups are separated by ';'; each is a selection, ':', then key=value
// pairs separated by ','. Parameters in no group use the hook's own options.
// The optimizer (sgd, adam, adamw) stays one per hook.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "core/optim/functional_optim.h"

namespace ddph {
namespace optimizer_overlap {

struct ParamGroup {
  std::string text;             // the group as written, for errors
  std::vector<size_t> indices;  // ascending, unique, non-empty
  optim::OptimConfig optim;     // the hook's options with the group's overrides
};

// Parses `text` over the hook's optimizer `base`. `params` is the `params`
// option's selection (empty: all). Throws DDPH_INVALID_ARGUMENT naming
// option 'param_groups' and the bad piece: a malformed group, selection or
// value; an unknown key, 'optimizer', a key of another optimizer or a key
// given twice; a group whose options torch.optim's rules refuse
// (find_config_problem, applied per group where torch checks only its
// defaults); a parameter in two groups, or one that `params` leaves out.
std::vector<ParamGroup> parse_param_groups(const std::string& text, const optim::OptimConfig& base,
                                           const std::vector<size_t>& params);

}  // namespace optimizer_overlap
}  // namespace ddph
