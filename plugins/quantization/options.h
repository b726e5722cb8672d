// The options of the quantization hooks: their schemas (what the loader
// checks a config against) and the typed, validated values a hook runs with.
#pragma once

#include <ddph/ddph.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/base/option_check.h"
#include "core/base/option_specs.h"

namespace ddph {
namespace quantization {

enum class Protocol { kAllgather, kReduceScatter, kShard };
enum class Rounding { kNearest, kStochastic };
enum class NonFinite { kPropagate, kError };

struct QuantOptions {
  Protocol protocol = Protocol::kAllgather;
  // Elements per channel; 0 means the hook is per_tensor (one channel).
  size_t channel_size = 0;
  int bits = 8;
  Rounding rounding = Rounding::kNearest;
  uint64_t seed = 0;
  bool error_feedback = false;
  uint64_t min_bytes = 0;
  NonFinite nonfinite = NonFinite::kPropagate;
  // reduce_scatter on the host, per_channel: slices a bucket travels in
  // (protocol_reduce_scatter.cpp); 0 picks by the bucket's size.
  size_t slices = 0;

  int qmax() const { return (1 << bits) - 1; }
};

// Schemas; per_channel's adds channel_size to per_tensor's.
OptionSpecs per_tensor_specs();
OptionSpecs per_channel_specs();
// per_channel_gather's: bits, channel_size and nonfinite only (a gather
// averages nothing, so it has no protocol, rounding or error feedback).
OptionSpecs per_channel_gather_specs();

// Both hooks' check_options, which create() runs before parse_options:
// refuses what the schema cannot express (bits other than 8, 4 or 2) and a
// bucket dtype other than float32 handed by a wrapper (fp16_wrapper).
void check_options(OptionCheck& c, const char* hook, bool per_channel);

// Reads the values create() received (already checked by check_options).
QuantOptions parse_options(const ddph_hook_init_t& init, bool per_channel);
// per_channel_gather's values: nearest rounding, no error feedback.
QuantOptions parse_gather_options(const ddph_hook_init_t& init);

// The DDPH_NONFINITE message under option nonfinite: error, when the ranks
// in `bad` held NaN or Inf in the bucket ("on" a rank's bucket, or "in the
// row of" a rank for a gather).
std::string nonfinite_message(const char* hook, const char* where, const std::vector<int>& bad,
                              const ddph_bucket_t& bucket);

}  // namespace quantization
}  // namespace ddph
