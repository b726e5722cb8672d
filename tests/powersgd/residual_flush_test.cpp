// ABI 1.10: powersgd and batched_powersgd hand back their error-feedback
// error (take_residual) once past start_iter, so that a plain averaging
// allreduce of the bucket it is added to pays back what the low-rank means
// left out. On 2 Gloo ranks, against exact sums.
#include "tests/support/residual_flush.h"

#include <gtest/gtest.h>

namespace {

using ddph_test::expect_flush_keeps_the_sum;
using ddph_test::FlushCase;

// fp32 rounding over 5 steps of gradients in [-1, 1) and rank-2 products.
constexpr double kRounding = 1e-5;

// Two allreduce steps, then three compressed ones; a 64 x 32 matrix (what
// is compressed) and a bias of 32 (what travels uncompressed).
FlushCase rank2(const char* hook, bool error_feedback) {
  return FlushCase{"powersgd",
                   hook,
                   {{"rank", "2"},
                    {"start_iter", "2"},
                    {"error_feedback", error_feedback ? "true" : "false"},
                    {"warm_start", "true"}},
                   {{64, 32}, {32}}};
}

TEST(ResidualFlush, PowerSgdRank2KeepsTheSum) {
  expect_flush_keeps_the_sum(rank2("powersgd", true), true, kRounding);
}

// Its error buffer is padded to a square (46 x 46 for 2080 elements): the
// padding is no gradient and is not flushed.
TEST(ResidualFlush, BatchedPowerSgdRank2KeepsTheSum) {
  expect_flush_keeps_the_sum(rank2("batched_powersgd", true), true, kRounding);
}

TEST(ResidualFlush, WithoutErrorFeedbackTakeResidualIsANoOp) {
  expect_flush_keeps_the_sum(rank2("powersgd", false), false, kRounding);
}

}  // namespace
