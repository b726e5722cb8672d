// ABI 1.10: powersgd and batched_powersgd hand back their error-feedback
// error (take_residual) once past start_iter, so that a plain averaging
// allreduce of the bucket it is added to pays back what the low-rank means
// left out. On 2 Gloo ranks, against exact sums.
#include <gtest/gtest.h>

#include "tests/powersgd/residual_flush_cases.h"

namespace {

using ddph_test::expect_flush_keeps_the_sum;
using namespace ddph_test::psgd_flush;

TEST(ResidualFlush, PowerSgdRank2KeepsTheSum) {
  expect_flush_keeps_the_sum(rank2("powersgd", true), true, kRounding);
}

TEST(ResidualFlush, BatchedPowerSgdRank2KeepsTheSum) {
  expect_flush_keeps_the_sum(rank2("batched_powersgd", true), true, kRounding);
}

TEST(ResidualFlush, WithoutErrorFeedbackTakeResidualIsANoOp) {
  expect_flush_keeps_the_sum(rank2("powersgd", false), false, kRounding);
}

}  // namespace
