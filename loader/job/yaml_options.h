// Typing YAML option values against a plugin's schema, reporting each problem
// at the value's own line and column.
#pragma once

#include <ddph/ddph.h>

#include <string>
#include <vector>

#include "core/base/options.h"
#include "loader/job/config.h"

namespace ddph {
namespace loader {

// Checks every given value (unknown names, types, ranges, choices) and every
// required option, adding one problem per fault under key_prefix ("hook.options").
// section_at is where missing required options are reported. On success
// fills *out with the complete list (defaults included) and returns true.
bool resolve_yaml_options(const ddph_option_spec_t* specs, size_t num_specs,
                          const std::vector<OptionValue>& given, const std::string& key_prefix,
                          const Location& section_at, Problems& problems, OptionList* out);

}  // namespace loader
}  // namespace ddph
