// The quantization hooks on GPU buckets over Gloo (which stages CUDA buffers
// through host memory), 2 and 3 real processes sharing one GPU, against the
// same hook on the same values in host buckets: every rank's GPU result has
// the bits of its host result, the ranks agree, and with error feedback the
// checkpoints are the same bytes. Unlike the world of one over NCCL
// (gpu_hooks_test), every rank here quantizes different data and the
// owners' chunks differ, so the rank headers, the alltoallv offsets and the
// owner residuals of the CUDA path are exercised across ranks. Skips with
// one line without a GPU.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "tests/quantization/hooks_ranks.h"
#include "tests/support/cuda_device.h"
#include "tests/support/multiprocess.h"
#include "tests/support/session_ranks.h"

namespace {

using ddph_test::quant::hook_blob;
using ddph_test::quant::inputs;

struct Case {
  const char* hook;
  const char* options;
  int world;
};

const Case kCases[] = {
    {"per_tensor", "protocol: allgather", 2},
    {"per_channel", "protocol: allgather, bits: 2, error_feedback: true", 3},
    {"per_channel", "protocol: reduce_scatter, bits: 4, rounding: stochastic, error_feedback: true",
     3},
    {"per_tensor", "protocol: reduce_scatter, bits: 8, error_feedback: true", 2},
};

int body(const Case& c, int rank, int world, const std::string& dir) {
  DDPH_CHILD_CHECK(cudaSetDevice(0) == cudaSuccess, "rank %d: cudaSetDevice", rank);
  cudaStream_t stream = nullptr;
  DDPH_CHILD_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess,
                   "rank %d: cudaStreamCreate", rank);
  const std::string yaml = ddph_test::quant::yaml(c.hook, c.options);
  std::string error;
  ddph_session_t* gpu = ddph_test::open_session(yaml, rank, world, dir, &error);
  DDPH_CHILD_CHECK(gpu != nullptr, "%s rank %d: %s", c.options, rank, error.c_str());
  ddph_session_t* cpu = ddph_test::open_session(yaml, rank, world, dir, &error);
  DDPH_CHILD_CHECK(cpu != nullptr, "%s rank %d: %s", c.options, rank, error.c_str());
  const size_t n = 5000;  // not a multiple of 512; holds inputs()' negative and constant runs
  for (uint64_t step = 0; step < 3; ++step) {
    std::vector<float> host = inputs(rank, step, n);
    ddph_test::DeviceVec<float> device(host);  // waits for the upload to land
    DDPH_CHILD_CHECK(ddph_test::quant::run_bucket_msg(cpu, host, 0, step, nullptr) == DDPH_OK,
                     "%s rank %d step %d: host bucket", c.options, rank, int(step));
    ddph_test::FloatBucket shape(host, 0, step, true);  // its data is replaced by on_gpu
    std::string message;
    DDPH_CHILD_CHECK(
        ddph_test::run_bucket(gpu, ddph_test::on_gpu(shape.bucket, device.get(), stream),
                              &message) == DDPH_OK,
        "%s rank %d step %d: GPU bucket: %s", c.options, rank, int(step), message.c_str());
    const std::vector<float> back = device.host(stream);
    const std::string differ = ddph_test::bit_difference(back, host);
    DDPH_CHILD_CHECK(differ.empty(), "%s rank %d step %d: %s", c.options, rank, int(step),
                     differ.c_str());
    DDPH_CHILD_CHECK(ddph_test::same_on_all_ranks(cpu, back.data(), n * sizeof(float)),
                     "%s step %d: ranks differ", c.options, int(step));
  }
  const std::string gs = hook_blob(ddph_test::session_state(gpu));
  const std::string cs = hook_blob(ddph_test::session_state(cpu));
  DDPH_CHILD_CHECK(gs == cs, "%s rank %d: checkpoints differ (%zu and %zu bytes)", c.options, rank,
                   gs.size(), cs.size());
  ddph_session_close(gpu);
  ddph_session_close(cpu);
  cudaStreamDestroy(stream);
  return 0;
}

TEST(QuantGpuHooksOverGloo, GpuBucketsGiveTheCpuPathsBitsOnEveryRank) {
  DDPH_SKIP_WITHOUT_GPU_BEFORE_FORK();
  for (const Case& c : kCases) {
    const auto results = ddph_test::run_ranks(
        c.world,
        [&](int rank, int world, const std::string& dir) { return body(c, rank, world, dir); },
        240);
    EXPECT_TRUE(ddph_test::all_passed(results))
        << c.hook << " {" << c.options << "}: " << ddph_test::describe(results);
  }
}

}  // namespace
