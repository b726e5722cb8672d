// The options of the powersgd hooks: their schema (what `ddph validate`
// checks a config against) and the typed values a hook runs with. Names and
// defaults follow PyTorch's PowerSGDState.
#pragma once

#include <ddph/ddph.h>

#include <cstddef>
#include <cstdint>

#include "core/base/option_check.h"
#include "core/base/option_specs.h"

namespace ddph {
namespace powersgd {

struct PsgdOptions {
  int rank = 1;                     // matrix_approximation_rank
  uint64_t start_iter = 1000;       // start_powerSGD_iter
  double min_compression_rate = 2;  // layer-wise hook only
  bool error_feedback = true;       // use_error_feedback
  bool warm_start = true;
  float orthogonalization_epsilon = 0;
  uint64_t seed = 0;              // random_seed
  bool batch_same_shape = false;  // batch_tensors_with_same_shape (layer-wise hook only)
  bool overlap_rest = false;      // layer-wise hook only: layerwise_hook.cpp
};

// Both hooks share one schema, except that min_compression_rate and
// batch_same_shape exist only for the layer-wise hook (the batched hook has
// one matrix per bucket).
OptionSpecs layerwise_specs();
OptionSpecs batched_specs();

// The rules the schema cannot express (start_iter <= 1 with error feedback
// or warm start is refused, as PyTorch's PowerSGDState does): both hooks'
// check_options, which create() runs before parse_options.
void check_options(OptionCheck& c, const char* hook);

// Reads the values create() received (already checked by check_options).
PsgdOptions parse_options(const ddph_hook_init_t& init, bool layerwise);

}  // namespace powersgd
}  // namespace ddph
