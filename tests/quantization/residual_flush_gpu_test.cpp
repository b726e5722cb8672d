// take_residual on the quantization hooks' CUDA path: the host test's cases
// (residual_flush_cases.h) with every bucket on GPU 0, 2 processes over
// Gloo. The CUDA path keeps its residuals in GPU memory
// (core/memory/resident_floats.h) and must hand back the same sums. Skips
// with one line without a GPU.
#include <gtest/gtest.h>

#include "tests/quantization/residual_flush_cases.h"
#include "tests/support/residual_flush_gpu.h"

namespace {

using ddph_test::expect_flush_keeps_the_sum;
using ddph_test::GpuPlace;
using namespace ddph_test::quant_flush;

TEST(ResidualFlushGpu, PerChannel4BitReduceScatterKeepsTheSum) {
  DDPH_SKIP_WITHOUT_GPU_BEFORE_FORK();
  expect_flush_keeps_the_sum(per_channel_4bit(true), true, kRounding, GpuPlace::make);
}

TEST(ResidualFlushGpu, PerTensorAllgatherKeepsTheSum) {
  DDPH_SKIP_WITHOUT_GPU_BEFORE_FORK();
  expect_flush_keeps_the_sum(per_tensor_allgather(), true, kRounding, GpuPlace::make);
}

TEST(ResidualFlushGpu, PerTensorReduceScatterKeepsTheSum) {
  DDPH_SKIP_WITHOUT_GPU_BEFORE_FORK();
  expect_flush_keeps_the_sum(per_tensor_reduce_scatter(), true, kRounding, GpuPlace::make);
}

TEST(ResidualFlushGpu, WithoutErrorFeedbackTakeResidualIsANoOp) {
  DDPH_SKIP_WITHOUT_GPU_BEFORE_FORK();
  expect_flush_keeps_the_sum(per_channel_4bit(false), false, kRounding, GpuPlace::make);
}

}  // namespace
