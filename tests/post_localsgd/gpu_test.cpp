// post_localsgd and model_averaging on CUDA buckets against their CPU path,
// on a world of one: GPU 0 over NCCL and the host over Gloo, across the
// local-SGD start step and the averaging periods (periodic and
// hierarchical), give the same gradient and parameter bits after every step
// and the same save_state bytes. On one rank every mean is the identity;
// what this checks is the device plumbing (parameters and scratch on the
// GPU, the copies and collectives ordered on the bucket's stream) and that
// the host-side step logic is shared. Without a GPU every test skips.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <ostream>
#include <string>
#include <vector>

#include "tests/support/cuda_device.h"
#include "tests/support/gpu_lent_bucket.h"
#include "tests/support/multiprocess.h"
#include "tests/support/session_ranks.h"

namespace {

using ddph_test::LentBucket;
using ddph_test::same_bits;

std::vector<float> values(uint64_t step, size_t n, double phase) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = float(std::sin(double(i) * 0.29 + double(step) + phase) * std::pow(2.0, int(i % 9) - 4));
  return v;
}

struct Case {
  const char* name;
  const char* hook;
};

// gtest prints a parameter by this, in test names and failures.
void PrintTo(const Case& c, std::ostream* os) {
  *os << c.name;
}

class CudaLocalSgd : public ddph_test::GpuStreamTest<Case> {};

TEST_P(CudaLocalSgd, EveryStepMatchesTheCpuPathBitForBit) {
  const std::string hook = GetParam().hook;
  std::string error;
  ddph_session_t* gpu =
      ddph_test::open_session("comm: {backend: nccl, timeout: 20s}\nhook: " + hook + "\n", 0, 1,
                              ddph_test::make_temp_dir("ddph-lsgd-gpu"), &error);
  ASSERT_NE(gpu, nullptr) << error;
  ddph_session_t* cpu =
      ddph_test::open_session("comm: {backend: gloo, timeout: 20s}\nhook: " + hook + "\n", 0, 1,
                              ddph_test::make_temp_dir("ddph-lsgd-gpu"), &error);
  ASSERT_NE(cpu, nullptr) << error;
  LentBucket g(true, {5, 130, 1}), c(false, {5, 130, 1});
  g.set_params(values(0, g.numel(), 0.5));
  c.set_params(values(0, c.numel(), 0.5));
  for (uint64_t step = 0; step < 9; ++step) {
    const std::vector<float> grads = values(step, g.numel(), 0.0);
    g.set_grads(grads);
    c.set_grads(grads);
    std::string message;
    ASSERT_EQ(ddph_test::run_bucket(cpu, c.bucket(0, step, true, nullptr), &message), DDPH_OK)
        << message;
    ASSERT_EQ(ddph_test::run_bucket(gpu, g.bucket(0, step, true, stream_), &message), DDPH_OK)
        << message;
    EXPECT_TRUE(same_bits(g.grads(), c.grads())) << "gradients after step " << step;
    EXPECT_TRUE(same_bits(g.params(), c.params())) << "parameters after step " << step;
    EXPECT_TRUE(same_bits(g.grads(), grads)) << "a mean over one rank changed the gradients";
  }
  const std::string state = ddph_test::session_state(gpu);
  EXPECT_FALSE(state.empty());
  EXPECT_EQ(state, ddph_test::session_state(cpu));
  ddph_session_close(gpu);
  ddph_session_close(cpu);
}

INSTANTIATE_TEST_SUITE_P(
    Hooks, CudaLocalSgd,
    ::testing::Values(
        Case{"post_localsgd_subgroups",
             "{family: post_localsgd, name: post_localsgd, options: {start_localsgd_iter: 3, "
             "subgroup_size: 1}}"},
        Case{"post_localsgd_no_allreduce",
             "{family: post_localsgd, name: post_localsgd, options: {start_localsgd_iter: 2, "
             "post_local_gradient_allreduce: false}}"},
        Case{"periodic_averaging",
             "{family: post_localsgd, name: model_averaging, options: {period: 2, warmup_steps: "
             "3}, wrap: {family: post_localsgd, name: post_localsgd, options: "
             "{start_localsgd_iter: 4}}}"},
        Case{"hierarchical_averaging",
             "{family: post_localsgd, name: model_averaging, options: {hierarchy: '2:1,3:1'}, "
             "wrap: {family: default, name: allreduce}}"},
        Case{"under_hook_then_optimizer",
             "{family: optimizer_overlap, name: hook_then_optimizer, options: {optimizer: sgd, "
             "lr: 0.1, momentum: 0.9}, wrap: {family: post_localsgd, name: model_averaging, "
             "options: {period: 2}, wrap: {family: post_localsgd, name: post_localsgd, options: "
             "{start_localsgd_iter: 2}}}}"}),
    [](const ::testing::TestParamInfo<Case>& info) { return std::string(info.param.name); });

}  // namespace
