// The quantization hooks' take_residual cases (residual_flush.h), shared by
// the host test and the GPU one.
#pragma once

#include "tests/support/residual_flush.h"

namespace ddph_test::quant_flush {

// fp32 rounding over 5 steps of gradients in [-1, 1).
constexpr double kRounding = 1e-5;
// Not whole channels of 512 on either rank's chunk, and above min_bytes.
constexpr int64_t kElements = 40000;

// The time-to-accuracy matrix's 4-bit row (benchmarks/time_to_accuracy/hooks.py).
inline FlushCase per_channel_4bit(bool error_feedback) {
  return FlushCase{"quantization",
                   "per_channel",
                   {{"protocol", "reduce_scatter"},
                    {"channel_size", "512"},
                    {"bits", "4"},
                    {"min_bytes", "65536"},
                    {"error_feedback", error_feedback ? "true" : "false"}},
                   {{kElements}}};
}

inline FlushCase per_tensor_allgather() {
  return FlushCase{"quantization",
                   "per_tensor",
                   {{"protocol", "allgather"}, {"bits", "4"}, {"error_feedback", "true"}},
                   {{kElements}}};
}

inline FlushCase per_tensor_reduce_scatter() {
  return FlushCase{"quantization",
                   "per_tensor",
                   {{"protocol", "reduce_scatter"}, {"bits", "8"}, {"error_feedback", "true"}},
                   {{kElements}}};
}

}  // namespace ddph_test::quant_flush
