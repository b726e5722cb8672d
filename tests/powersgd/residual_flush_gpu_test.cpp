// take_residual on the PowerSGD hooks' CUDA path: the host test's cases
// (residual_flush_cases.h) with every bucket on GPU 0, 2 processes over
// Gloo. The CUDA path keeps its error in GPU memory and must hand back the
// same sums. Skips with one line without a GPU.
#include <gtest/gtest.h>

#include "tests/powersgd/residual_flush_cases.h"
#include "tests/support/residual_flush_gpu.h"

namespace {

using ddph_test::expect_flush_keeps_the_sum;
using ddph_test::GpuPlace;
using namespace ddph_test::psgd_flush;

TEST(ResidualFlushGpu, PowerSgdRank2KeepsTheSum) {
  DDPH_SKIP_WITHOUT_GPU_BEFORE_FORK();
  expect_flush_keeps_the_sum(rank2("powersgd", true), true, kRounding, GpuPlace::make);
}

TEST(ResidualFlushGpu, BatchedPowerSgdRank2KeepsTheSum) {
  DDPH_SKIP_WITHOUT_GPU_BEFORE_FORK();
  expect_flush_keeps_the_sum(rank2("batched_powersgd", true), true, kRounding, GpuPlace::make);
}

TEST(ResidualFlushGpu, WithoutErrorFeedbackTakeResidualIsANoOp) {
  DDPH_SKIP_WITHOUT_GPU_BEFORE_FORK();
  expect_flush_keeps_the_sum(rank2("powersgd", false), false, kRounding, GpuPlace::make);
}

}  // namespace
