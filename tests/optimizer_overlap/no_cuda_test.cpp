// A CUDA bucket where it cannot run: in a build without CUDA
// (DDPH_WITH_CUDA=OFF) hook_then_optimizer refuses it with DDPH_UNSUPPORTED
// saying so, before the inner hook sends anything; in a build with CUDA on a
// machine without a GPU, the wrapped hook's refusal comes back named. The
// bucket's pointers are never read, so none is real. Where a GPU is present
// the GPU tests (gpu_test.cpp) cover CUDA buckets instead.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "tests/support/fake_cuda_bucket.h"
#include "tests/support/multiprocess.h"
#include "tests/support/session_ranks.h"
#if DDPH_TEST_WITH_CUDA
#include "tests/support/cuda_device.h"
#endif

namespace {

// What a fake CUDA bucket (lent parameters included) gets from
// hook_then_optimizer around default/allreduce over Gloo, world 1.
std::string refusal() {
  const std::string dir = ddph_test::make_temp_dir("ddph-optim-nocuda");
  ddph_session_t* s = ddph_test::open_session(
      "comm: {backend: gloo, timeout: 20s}\nhook: {family: optimizer_overlap, name: "
      "hook_then_optimizer, options: {optimizer: adam}, wrap: {family: default, name: "
      "allreduce}}\n",
      0, 1, dir);
  EXPECT_NE(s, nullptr);
  if (s == nullptr) return "";
  ddph_test::FakeCudaBucket fake;
  const ddph_bucket_t& b = fake.bucket;
  std::string message;
  EXPECT_EQ(ddph_test::run_bucket(s, b, &message), DDPH_UNSUPPORTED) << message;
  ddph_session_close(s);
  return message;
}

TEST(OptimizerWithoutCuda, ACudaBucketIsRefusedUpFront) {
#if DDPH_TEST_WITH_CUDA
  GTEST_SKIP() << "this build has CUDA: ddph_test_optimizer_overlap_gpu covers CUDA buckets";
#endif
  const std::string message = refusal();
  EXPECT_NE(message.find("hook_then_optimizer: the buffer is CUDA memory, but this build of "
                         "ddphooks has no CUDA"),
            std::string::npos)
      << message;
}

TEST(OptimizerWithoutGpu, TheWrappedHooksRefusalIsNamed) {
#if !DDPH_TEST_WITH_CUDA
  GTEST_SKIP() << "this build has no CUDA: ACudaBucketIsRefusedUpFront covers it";
#else
  if (ddph_test::no_cuda_device_reason().empty())
    GTEST_SKIP() << "a GPU is present: ddph_test_optimizer_overlap_gpu runs CUDA buckets instead";
  const std::string message = refusal();
  EXPECT_NE(message.find("hook_then_optimizer: the wrapped hook 'allreduce' cannot run on this "
                         "CUDA bucket"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("no usable CUDA device"), std::string::npos) << message;
#endif
}

}  // namespace
