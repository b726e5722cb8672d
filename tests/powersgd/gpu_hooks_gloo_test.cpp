// The powersgd hooks on GPU buckets over Gloo (which stages CUDA buffers
// through host memory: core/comm/host_staging.h), 2 real processes sharing
// one GPU, against the same hook on the same values in host buckets: where
// a world of one divides by 1, this checks the means. Results within
// gpu_compare.h's tolerance of the CPU path; every rank ends with the same
// bits (each computes P Q^T from the same allreduced factors on the same
// GPU model). Without a GPU the test skips with one line. A binary of its
// own: the parent must not touch CUDA before forking the ranks. Also: under
// fp16_wrapper (a 16-bit CUDA bucket, factors in fp16 on the wire) the mean
// of rank-2 gradients comes back exact up to fp16 rounding.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "tests/powersgd/gpu_compare.h"
#include "tests/powersgd/psgd_support.h"
#include "tests/support/cuda_device.h"
#include "tests/support/multiprocess.h"
#include "tests/support/session_ranks.h"

namespace {

namespace ps = ddph_test::psgd;

constexpr int kStartIter = 2;
constexpr int kSteps = 5;

const std::vector<ps::Shape> kShapes = {{16, 24}, {24}, {20, 9}, {7}};

struct Case {
  const char* hook;
  const char* options;
};

const Case kCases[] = {
    {"powersgd", "rank: 2, start_iter: 2"},
    {"powersgd", "rank: 4, start_iter: 2, warm_start: false"},
    {"batched_powersgd", "rank: 1, start_iter: 2"},
    {"batched_powersgd", "rank: 3, start_iter: 2, error_feedback: false"},
};

int body(const Case& c, int rank, int world, const std::string& dir) {
  DDPH_CHILD_CHECK(cudaSetDevice(0) == cudaSuccess, "rank %d: cudaSetDevice", rank);
  cudaStream_t stream = nullptr;
  DDPH_CHILD_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess,
                   "rank %d: cudaStreamCreate", rank);
  std::string error;
  const std::string yaml = ps::yaml(c.hook, c.options);
  ddph_session_t* gpu = ddph_test::open_session(yaml, rank, world, dir, &error);
  DDPH_CHILD_CHECK(gpu != nullptr, "%s rank %d: %s", c.hook, rank, error.c_str());
  ddph_session_t* cpu = ddph_test::open_session(yaml, rank, world, dir, &error);
  DDPH_CHILD_CHECK(cpu != nullptr, "%s rank %d: %s", c.hook, rank, error.c_str());
  // K_max: the batched hook's side, ceil(sqrt(numel)) = 25 here; the
  // layer-wise hook's widest view has 24 columns.
  const double tol = ps::gpu_tolerance(25, kSteps - kStartIter);
  const size_t n = size_t(ps::numel_of(kShapes));
  for (int step = 0; step < kSteps; ++step) {
    const std::vector<float> in = ps::gpu_gradients(n, rank, 0, step);
    std::vector<float> on_cpu = in;
    std::string message;
    DDPH_CHILD_CHECK(
        ps::run_shaped(cpu, on_cpu, kShapes, 0, uint64_t(step), true, &message) == DDPH_OK,
        "%s rank %d step %d: host bucket: %s", c.hook, rank, step, message.c_str());
    std::vector<float> shadow = in;  // lends the parameter views
    ps::ShapedBucket views(shadow, kShapes, 0, uint64_t(step), true);
    ddph_test::DeviceVec<float> device(in);
    const ddph_bucket_t b = ddph_test::on_gpu(*views.get(), device.get(), stream);
    DDPH_CHILD_CHECK(ddph_test::run_bucket(gpu, b, &message) == DDPH_OK,
                     "%s rank %d step %d: GPU bucket: %s", c.hook, rank, step, message.c_str());
    const std::vector<float> back = device.host(stream);
    const ::testing::AssertionResult near = ps::gpu_close(back, on_cpu, tol);
    DDPH_CHILD_CHECK(bool(near), "%s rank %d step %d: %s", c.hook, rank, step, near.message());
    DDPH_CHILD_CHECK(ddph_test::same_on_all_ranks(cpu, back.data(), n * sizeof(float)),
                     "%s step %d: ranks differ on the GPU", c.hook, step);
  }
  ddph_session_close(gpu);
  ddph_session_close(cpu);
  cudaStreamDestroy(stream);
  return 0;
}

// Each rank's matrices are outer products u v^T (1-D views: any values), so
// the sum over 2 ranks has rank <= 2 and rank-2 PowerSGD without error
// feedback returns the exact mean, up to the wrapper's fp16 rounding: six
// roundings of u16 = 2^-11 on the way (the input cast, P and Q each cast
// and summed in fp16, the cast back), amplified by orthogonalization by at
// most kFp16Amplification, relative to the largest value: 1.2e-2. The CPU
// path measures 2.2e-3 on these gradients; a wrong divide or layout is off
// by O(1).
constexpr double kFp16Amplification = 4;

std::vector<float> low_rank(int rank, int step) {
  std::vector<float> out;
  for (const ps::Shape& s : kShapes) {
    const size_t n = size_t(ps::numel_of({s}));
    const std::vector<float> r = ps::gpu_gradients(n + 64, rank, 7, step);
    if (s.size() == 1) {
      out.insert(out.end(), r.begin(), r.begin() + long(n));
      continue;
    }
    const size_t rows = size_t(s[0]), cols = n / rows;
    for (size_t i = 0; i < rows; ++i)
      for (size_t j = 0; j < cols; ++j) out.push_back(r[i] * r[rows + j]);
  }
  return out;
}

int wrapped_body(int rank, int world, const std::string& dir) {
  DDPH_CHILD_CHECK(cudaSetDevice(0) == cudaSuccess, "rank %d: cudaSetDevice", rank);
  cudaStream_t stream = nullptr;
  DDPH_CHILD_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess,
                   "rank %d: cudaStreamCreate", rank);
  std::string error;
  ddph_session_t* gpu = ddph_test::open_session(
      ps::yaml("powersgd", "rank: 2, start_iter: 2, error_feedback: false", "fp16_wrapper"), rank,
      world, dir, &error);
  DDPH_CHILD_CHECK(gpu != nullptr, "rank %d: %s", rank, error.c_str());
  for (int step = 0; step < kSteps; ++step) {
    std::vector<double> mean(size_t(ps::numel_of(kShapes)), 0.0);
    for (int r = 0; r < world; ++r) {
      const std::vector<float> g = low_rank(r, step);
      for (size_t i = 0; i < g.size(); ++i) mean[i] += double(g[i]) / world;
    }
    const std::vector<float> in = low_rank(rank, step);
    std::vector<float> shadow = in;
    ps::ShapedBucket views(shadow, kShapes, 0, uint64_t(step), true);
    ddph_test::DeviceVec<float> device(in);
    const ddph_bucket_t b = ddph_test::on_gpu(*views.get(), device.get(), stream);
    std::string message;
    DDPH_CHILD_CHECK(ddph_test::run_bucket(gpu, b, &message) == DDPH_OK,
                     "rank %d step %d: GPU bucket: %s", rank, step, message.c_str());
    const std::vector<float> back = device.host(stream);
    const std::vector<float> want(mean.begin(), mean.end());
    const ::testing::AssertionResult near =
        ps::gpu_close(back, want, 6 * kFp16Amplification * std::ldexp(1.0, -11));
    DDPH_CHILD_CHECK(bool(near), "rank %d step %d: not the mean: %s", rank, step, near.message());
  }
  ddph_session_close(gpu);
  cudaStreamDestroy(stream);
  return 0;
}

TEST(PsgdGpuOverGloo, UnderFp16WrapperTheMeanOfLowRankGradientsIsExact) {
  DDPH_SKIP_WITHOUT_GPU_BEFORE_FORK();
  const auto results = ddph_test::run_ranks(2, wrapped_body, 240);
  EXPECT_TRUE(ddph_test::all_passed(results)) << ddph_test::describe(results);
}

TEST(PsgdGpuOverGloo, TwoRanksOnOneGpuMatchTheCpuPath) {
  DDPH_SKIP_WITHOUT_GPU_BEFORE_FORK();
  for (const Case& c : kCases) {
    const auto results = ddph_test::run_ranks(
        2, [&](int rank, int world, const std::string& dir) { return body(c, rank, world, dir); },
        240);
    EXPECT_TRUE(ddph_test::all_passed(results))
        << c.hook << " {" << c.options << "}: " << ddph_test::describe(results);
  }
}

}  // namespace
