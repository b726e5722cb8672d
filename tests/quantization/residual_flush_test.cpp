// ABI 1.10: per_channel and per_tensor hand back their error-feedback
// residuals (take_residual), so that a plain averaging allreduce of the
// bucket they are added to pays back what the quantized means left out:
// each rank's own residual, and for reduce_scatter the owner's error of
// re-quantizing its chunk's mean. On 2 Gloo ranks, against exact sums.
#include <gtest/gtest.h>

#include "tests/quantization/residual_flush_cases.h"

namespace {

using ddph_test::expect_flush_keeps_the_sum;
using namespace ddph_test::quant_flush;

TEST(ResidualFlush, PerChannel4BitReduceScatterKeepsTheSum) {
  expect_flush_keeps_the_sum(per_channel_4bit(true), true, kRounding);
}

TEST(ResidualFlush, PerTensorAllgatherKeepsTheSum) {
  expect_flush_keeps_the_sum(per_tensor_allgather(), true, kRounding);
}

TEST(ResidualFlush, PerTensorReduceScatterKeepsTheSum) {
  expect_flush_keeps_the_sum(per_tensor_reduce_scatter(), true, kRounding);
}

// Without error feedback the table still offers take_residual (it is per
// hook, not per option), and it changes nothing.
TEST(ResidualFlush, WithoutErrorFeedbackTakeResidualIsANoOp) {
  expect_flush_keeps_the_sum(per_channel_4bit(false), false, kRounding);
}

}  // namespace
