// The CUDA paths on two real ranks: comm_gloo stages CUDA buffers through
// host memory, so two processes can share one GPU. Each rank runs a GPU
// session and a host session side by side on the same rank-dependent
// inputs; after every step the GPU's gradients and parameters must be the
// host's bits, and after each averaging step the ranks must hold the same
// parameters. Unlike the world-of-one tests, the means here are real.
// Without a GPU the test skips with one line.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cmath>
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

std::vector<float> values(int rank, uint64_t step, size_t n, double phase) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = float(std::sin(double(i) * 0.31 + double(step) * 0.7 + double(rank) * 1.9 + phase) *
                 std::pow(2.0, int(i % 7) - 3));
  return v;
}

struct Case {
  const char* name;
  const char* hook;
  uint64_t period;  // steps s with s % period == period - 1 end with equal parameters; 0: none
};

// gtest prints a parameter by this, in test names and failures.
void PrintTo(const Case& c, std::ostream* os) {
  *os << c.name;
}

class GlooCuda : public ::testing::TestWithParam<Case> {};

TEST_P(GlooCuda, TwoRanksOnOneGpuMatchTheirHostRuns) {
  DDPH_SKIP_WITHOUT_GPU_BEFORE_FORK();
  const Case c = GetParam();
  auto res = ddph_test::run_ranks(
      2,
      [&](int rank, int world, const std::string& dir) {
        DDPH_CHILD_CHECK(cudaSetDevice(0) == cudaSuccess, "rank %d: cudaSetDevice", rank);
        cudaStream_t stream = nullptr;
        DDPH_CHILD_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess,
                         "rank %d: stream", rank);
        const std::string yaml =
            std::string("comm: {backend: gloo, timeout: 60s}\nhook: ") + c.hook;
        mkdir((dir + "/gpu").c_str(), 0700);  // both ranks try; one wins
        mkdir((dir + "/cpu").c_str(), 0700);
        ddph_session_t* gpu = ddph_test::open_session(yaml, rank, world, dir + "/gpu");
        ddph_session_t* cpu = ddph_test::open_session(yaml, rank, world, dir + "/cpu");
        DDPH_CHILD_CHECK(gpu != nullptr && cpu != nullptr, "rank %d: open", rank);
        LentBucket g(true, {3, 200, 17}), h(false, {3, 200, 17});
        // The same starting parameters on every rank, as DDP broadcasts them:
        // the ranks then differ only by what their hooks do.
        g.set_params(values(0, 0, g.numel(), 0.25));
        h.set_params(values(0, 0, h.numel(), 0.25));
        for (uint64_t step = 0; step < 7; ++step) {
          const std::vector<float> grads = values(rank, step, g.numel(), 0.0);
          g.set_grads(grads);
          h.set_grads(grads);
          std::string message;
          DDPH_CHILD_CHECK(
              ddph_test::run_bucket(gpu, g.bucket(0, step, true, stream), &message) == DDPH_OK,
              "rank %d gpu step %d: %s", rank, int(step), message.c_str());
          DDPH_CHILD_CHECK(
              ddph_test::run_bucket(cpu, h.bucket(0, step, true, nullptr), &message) == DDPH_OK,
              "rank %d cpu step %d: %s", rank, int(step), message.c_str());
          const std::vector<float> params = g.params();
          DDPH_CHILD_CHECK(same_bits(g.grads(), h.grads()), "rank %d step %d: gradients differ",
                           rank, int(step));
          DDPH_CHILD_CHECK(same_bits(params, h.params()), "rank %d step %d: parameters differ",
                           rank, int(step));
          if (c.period != 0 && step % c.period == c.period - 1)
            DDPH_CHILD_CHECK(ddph_test::same_on_all_ranks(cpu, params.data(), params.size() * 4),
                             "rank %d step %d: ranks differ right after averaging", rank,
                             int(step));
        }
        const std::string gs = ddph_test::session_state(gpu), hs = ddph_test::session_state(cpu);
        DDPH_CHILD_CHECK(!gs.empty() && gs == hs, "rank %d: save_state differs", rank);
        ddph_session_close(gpu);
        ddph_session_close(cpu);
        cudaStreamDestroy(stream);
        return 0;
      },
      240);
  EXPECT_TRUE(ddph_test::all_passed(res)) << ddph_test::describe(res);
}

INSTANTIATE_TEST_SUITE_P(
    Hooks, GlooCuda,
    ::testing::Values(
        // Subgroups of one after step 2: the gradients stop being averaged.
        Case{"post_localsgd",
             "{family: post_localsgd, name: post_localsgd, options: {start_localsgd_iter: 2, "
             "subgroup_size: 1}}",
             0},
        // PyTorch's order: local gradient, optimizer step, then every 3rd step
        // the average, after which the ranks agree.
        Case{"local_sgd_averaging",
             "{family: post_localsgd, name: model_averaging, options: {period: 3, warmup_steps: "
             "2}, wrap: {family: optimizer_overlap, name: hook_then_optimizer, options: "
             "{optimizer: sgd, lr: 0.1, momentum: 0.9}, wrap: {family: post_localsgd, name: "
             "post_localsgd, options: {start_localsgd_iter: 0, post_local_gradient_allreduce: "
             "false}}}}",
             3},
        // Allreduced gradients and the same Adam step: equal every step.
        Case{"adam_allreduce",
             "{family: optimizer_overlap, name: hook_then_optimizer, options: {optimizer: adam, "
             "lr: 0.01, amsgrad: true}, wrap: {family: default, name: allreduce}}",
             1}),
    [](const ::testing::TestParamInfo<Case>& info) { return std::string(info.param.name); });

}  // namespace
