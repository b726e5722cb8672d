// ABI 1.10: per_channel and per_tensor hand back their error-feedback
// residuals (take_residual), so that a plain averaging allreduce of the
// bucket they are added to pays back what the quantized means left out:
// each rank's own residual, and for reduce_scatter the owner's error of
// re-quantizing its chunk's mean. On 2 Gloo ranks, against exact sums.
#include "tests/support/residual_flush.h"

#include <gtest/gtest.h>

namespace {

using ddph_test::expect_flush_keeps_the_sum;
using ddph_test::FlushCase;

// fp32 rounding over 5 steps of gradients in [-1, 1).
constexpr double kRounding = 1e-5;
// Not whole channels of 512 on either rank's chunk, and above min_bytes.
constexpr int64_t kElements = 40000;

// The time-to-accuracy matrix's 4-bit row (benchmarks/time_to_accuracy/hooks.py).
FlushCase per_channel_4bit(bool error_feedback) {
  return FlushCase{"quantization",
                   "per_channel",
                   {{"protocol", "reduce_scatter"},
                    {"channel_size", "512"},
                    {"bits", "4"},
                    {"min_bytes", "65536"},
                    {"error_feedback", error_feedback ? "true" : "false"}},
                   {{kElements}}};
}

TEST(ResidualFlush, PerChannel4BitReduceScatterKeepsTheSum) {
  expect_flush_keeps_the_sum(per_channel_4bit(true), true, kRounding);
}

TEST(ResidualFlush, PerTensorAllgatherKeepsTheSum) {
  expect_flush_keeps_the_sum(
      FlushCase{"quantization",
                "per_tensor",
                {{"protocol", "allgather"}, {"bits", "4"}, {"error_feedback", "true"}},
                {{kElements}}},
      true, kRounding);
}

TEST(ResidualFlush, PerTensorReduceScatterKeepsTheSum) {
  expect_flush_keeps_the_sum(
      FlushCase{"quantization",
                "per_tensor",
                {{"protocol", "reduce_scatter"}, {"bits", "8"}, {"error_feedback", "true"}},
                {{kElements}}},
      true, kRounding);
}

// Without error feedback the table still offers take_residual (it is per
// hook, not per option), and it changes nothing.
TEST(ResidualFlush, WithoutErrorFeedbackTakeResidualIsANoOp) {
  expect_flush_keeps_the_sum(per_channel_4bit(false), false, kRounding);
}

}  // namespace
