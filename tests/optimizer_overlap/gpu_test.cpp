// hook_then_optimizer's CUDA path against its CPU path, on a world of one:
// the same buckets (two, with parameters of odd sizes) stepped on GPU 0
// over NCCL and on the host over Gloo give the same parameter bits after
// every step and the same save_state bytes, for each optimizer and a
// bfloat16 bucket; a checkpoint taken on the CPU resumes on the GPU.
// Without a GPU every test skips with one line.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
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

std::string yaml(const char* backend, const std::string& options) {
  return std::string("comm: {backend: ") + backend +
         ", timeout: 20s}\nhook: {family: optimizer_overlap, name: hook_then_optimizer, "
         "options: {" +
         options + "}, wrap: {family: default, name: allreduce}}\n";
}

// Two buckets, 0 (params of 37 and 300 elements) and 1 (1000, the step's
// last), on one side (host or GPU).
struct Side {
  Side(bool cuda, bool bf16) {
    b[0] = std::make_unique<LentBucket>(cuda, std::vector<size_t>{37, 300}, bf16);
    b[1] = std::make_unique<LentBucket>(cuda, std::vector<size_t>{1000}, bf16);
    for (size_t k = 0; k < 2; ++k) b[k]->set_params(ddph_test::initial_params(k, b[k]->numel()));
  }
  // Steps once; "" or the first error's text.
  std::string step(ddph_session_t* s, uint64_t step, cudaStream_t stream) {
    for (size_t k = 0; k < 2; ++k) {
      b[k]->set_grads(ddph_test::varied_gradients(step, double(k), b[k]->numel()));
      std::string message;
      if (ddph_test::run_bucket(s, b[k]->bucket(k, step, k == 1, stream), &message) != DDPH_OK)
        return message.empty() ? "error" : message;
    }
    return "";
  }
  std::unique_ptr<LentBucket> b[2];
};

struct Case {
  const char* name;
  const char* options;
  bool bf16;
  bool stateful;  // whether the optimizer keeps buffers a checkpoint must carry
};

// gtest prints a parameter by this, in test names and failures.
void PrintTo(const Case& c, std::ostream* os) {
  *os << c.name;
}

class CudaOptimizer : public ddph_test::GpuStreamTest<Case> {
 protected:
  ddph_session_t* open(const char* backend) {
    std::string error;
    ddph_session_t* s = ddph_test::open_session(yaml(backend, GetParam().options), 0, 1,
                                                ddph_test::make_temp_dir("ddph-optim-gpu"), &error);
    EXPECT_NE(s, nullptr) << backend << ": " << error;
    return s;
  }
};

TEST_P(CudaOptimizer, StepsAndStateMatchTheCpuPathBitForBit) {
  ddph_session_t* gpu = open("nccl");
  ddph_session_t* cpu = open("gloo");
  ASSERT_TRUE(gpu != nullptr && cpu != nullptr);
  Side g(true, GetParam().bf16), c(false, GetParam().bf16);
  for (uint64_t step = 0; step < 6; ++step) {
    ASSERT_EQ(c.step(cpu, step, nullptr), "") << "cpu step " << step;
    ASSERT_EQ(g.step(gpu, step, stream_), "") << "gpu step " << step;
    for (size_t k = 0; k < 2; ++k)
      ASSERT_TRUE(same_bits(g.b[k]->params(), c.b[k]->params()))
          << "bucket " << k << " after step " << step;
    if (step == 2 || step == 5) {
      const std::string on_gpu = ddph_test::session_state(gpu);
      EXPECT_FALSE(on_gpu.empty());
      EXPECT_EQ(on_gpu, ddph_test::session_state(cpu)) << "save_state after step " << step;
    }
  }
  ddph_session_close(gpu);
  ddph_session_close(cpu);
}

// The CPU's checkpoint after 3 steps, loaded into a fresh GPU session with
// the parameters of step 3, continues as the CPU run does; without it the
// stateful optimizers end elsewhere (the state did reach the device).
TEST_P(CudaOptimizer, ACpuCheckpointResumesOnTheGpu) {
  ddph_session_t* cpu = open("gloo");
  ASSERT_NE(cpu, nullptr);
  Side c(false, GetParam().bf16);
  for (uint64_t step = 0; step < 3; ++step) ASSERT_EQ(c.step(cpu, step, nullptr), "");
  const std::string blob = ddph_test::session_state(cpu);
  ASSERT_FALSE(blob.empty());
  std::vector<float> at3[2] = {c.b[0]->params(), c.b[1]->params()};
  for (uint64_t step = 3; step < 6; ++step) ASSERT_EQ(c.step(cpu, step, nullptr), "");

  for (int with_blob = 1; with_blob >= 0; --with_blob) {
    ddph_session_t* gpu = open("nccl");
    ASSERT_NE(gpu, nullptr);
    if (with_blob) {
      ddph_error_t* e = ddph_session_load_state(gpu, blob.data(), blob.size());
      ASSERT_EQ(e, nullptr) << ddph_error_message(e);
    }
    Side g(true, GetParam().bf16);
    for (size_t k = 0; k < 2; ++k) g.b[k]->set_params(at3[k]);
    for (uint64_t step = 3; step < 6; ++step) ASSERT_EQ(g.step(gpu, step, stream_), "");
    const bool same = same_bits(g.b[0]->params(), c.b[0]->params()) &&
                      same_bits(g.b[1]->params(), c.b[1]->params());
    if (with_blob) {
      EXPECT_TRUE(same) << "the resumed GPU run differs from the CPU run";
      EXPECT_EQ(ddph_test::session_state(gpu), ddph_test::session_state(cpu));
    } else if (GetParam().stateful) {
      EXPECT_FALSE(same) << "a GPU run without the checkpoint matches: the state was not used";
    }
    ddph_session_close(gpu);
  }
  ddph_session_close(cpu);
}

INSTANTIATE_TEST_SUITE_P(
    Optimizers, CudaOptimizer,
    ::testing::Values(
        Case{"sgd", "optimizer: sgd, lr: 0.1", false, false},
        Case{"sgd_nesterov_decay",
             "optimizer: sgd, lr: 0.05, momentum: 0.9, nesterov: true, "
             "weight_decay: 0.01",
             false, true},
        Case{"sgd_dampening_maximize",
             "optimizer: sgd, lr: 0.05, momentum: 0.8, dampening: 0.3, maximize: true", false,
             true},
        Case{"adam", "optimizer: adam, lr: 0.01", false, true},
        Case{"adam_amsgrad_decay", "optimizer: adam, lr: 0.01, amsgrad: true, weight_decay: 0.1",
             false, true},
        Case{"adamw_maximize", "optimizer: adamw, lr: 0.01, weight_decay: 0.1, maximize: true",
             false, true},
        Case{"adamw_amsgrad_bf16", "optimizer: adamw, lr: 0.01, amsgrad: true", true, true}),
    [](const ::testing::TestParamInfo<Case>& info) { return std::string(info.param.name); });

}  // namespace
