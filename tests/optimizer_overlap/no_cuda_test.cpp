// In a build without CUDA (DDPH_WITH_CUDA=OFF), hook_then_optimizer refuses
// a CUDA bucket with DDPH_UNSUPPORTED saying so, before the inner hook sends
// anything. The bucket's pointers are never read, so none is real. In a
// build with CUDA the GPU tests (optim_gpu_test.cpp) cover CUDA buckets.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "tests/session_gloo/session_ranks.h"

namespace {

TEST(OptimizerWithoutCuda, ACudaBucketIsRefusedUpFront) {
#if DDPH_TEST_WITH_CUDA
  GTEST_SKIP() << "this build has CUDA: ddph_test_optim_gpu covers CUDA buckets";
#endif
  char tmpl[] = "/tmp/ddph-optim-nocuda-XXXXXX";
  const char* dir = mkdtemp(tmpl);
  ASSERT_NE(dir, nullptr);
  ddph_session_t* s = ddph_test::open_session(
      "comm: {backend: gloo, timeout: 20s}\nhook: {family: optimizer_overlap, name: "
      "hook_then_optimizer, options: {optimizer: adam}, wrap: {family: default, name: "
      "allreduce}}\n",
      0, 1, dir);
  ASSERT_NE(s, nullptr);
  alignas(16) static float fake[8];  // stands in for device memory; never touched
  int64_t n = 8;
  ddph_param_t p{};
  p.struct_size = sizeof p;
  p.ndim = 1;
  p.shape = &n;
  p.data.data = fake;
  p.data.device = {kDLCUDA, 0};
  p.data.ndim = 1;
  p.data.dtype = {kDLFloat, 32, 1};
  p.data.shape = &n;
  ddph_bucket_t b{};
  b.struct_size = sizeof b;
  b.is_last = 1;
  b.buffer = p.data;
  b.num_params = 1;
  b.params = &p;
  std::string message;
  EXPECT_EQ(ddph_test::run_bucket(s, b, &message), DDPH_UNSUPPORTED) << message;
  EXPECT_NE(message.find("hook_then_optimizer: bucket.buffer is CUDA memory, but this build of "
                         "ddphooks has no CUDA"),
            std::string::npos)
      << message;
  ddph_session_close(s);
}

}  // namespace
