// An option schema as a table lists it (ddph_hook_t.options and
// num_options): specs with static storage, from an array or from a vector
// that outlives the table.
#pragma once

#include <ddph/ddph.h>

#include <cstddef>
#include <vector>

namespace ddph {

struct OptionSpecs {
  const ddph_option_spec_t* data = nullptr;
  size_t size = 0;
  OptionSpecs() = default;
  template <size_t N>
  OptionSpecs(const ddph_option_spec_t (&specs)[N]) : data(specs), size(N) {}
  OptionSpecs(const std::vector<ddph_option_spec_t>& specs)
      : data(specs.data()), size(specs.size()) {}
};

}  // namespace ddph
