// A CUDA bucket where it cannot run: a build without CUDA
// (DDPH_WITH_CUDA=OFF) refuses it with DDPH_UNSUPPORTED saying so, before
// anything is sent; a build with CUDA on a machine without a GPU names the
// wrapped hook's refusal (protocol allreduce) or the missing device
// (protocol reduce_scatter, whose step needs device memory). The bucket's
// pointers are never read, so none is real. Where a GPU is present,
// gpu_test.cpp runs CUDA buckets instead.
#include <gtest/gtest.h>

#include <string>

#include "tests/support/fake_cuda_bucket.h"
#include "tests/support/multiprocess.h"
#include "tests/support/session_ranks.h"
#if DDPH_TEST_WITH_CUDA
#include "tests/support/cuda_device.h"
#endif

namespace {

// What a fake CUDA bucket gets from zero_step with `protocol`, over Gloo,
// world 1.
std::string refusal(const char* protocol) {
  const std::string dir = ddph_test::make_temp_dir("ddph-zero-nocuda");
  ddph_session_t* s = ddph_test::open_session(
      std::string("comm: {backend: gloo, timeout: 20s}\nhook: {family: zero, name: zero_step, "
                  "options: {optimizer: adam, protocol: ") +
          protocol + "}, wrap: {family: default, name: allreduce}}\n",
      0, 1, dir);
  EXPECT_NE(s, nullptr);
  if (s == nullptr) return "";
  ddph_test::FakeCudaBucket fake;
  std::string message;
  EXPECT_NE(ddph_test::run_bucket(s, fake.bucket, &message), DDPH_OK) << message;
  ddph_session_close(s);
  return message;
}

TEST(ZeroWithoutCuda, ACudaBucketIsRefusedUpFront) {
#if DDPH_TEST_WITH_CUDA
  GTEST_SKIP() << "this build has CUDA: ddph_test_zero_gpu covers CUDA buckets";
#endif
  for (const char* protocol : {"allreduce", "reduce_scatter"}) {
    const std::string message = refusal(protocol);
    EXPECT_NE(message.find("zero_step: the buffer is CUDA memory, but this build of ddphooks "
                           "has no CUDA"),
              std::string::npos)
        << protocol << ": " << message;
  }
}

TEST(ZeroWithoutGpu, TheRefusalNamesTheWrappedHookOrTheDevice) {
#if !DDPH_TEST_WITH_CUDA
  GTEST_SKIP() << "this build has no CUDA: ACudaBucketIsRefusedUpFront covers it";
#else
  if (ddph_test::no_cuda_device_reason().empty())
    GTEST_SKIP() << "a GPU is present: ddph_test_zero_gpu runs CUDA buckets instead";
  std::string message = refusal("allreduce");
  EXPECT_NE(message.find("zero_step: the wrapped hook 'allreduce' cannot run on this CUDA bucket"),
            std::string::npos)
      << message;
  message = refusal("reduce_scatter");
  EXPECT_NE(message.find("zero_step: no usable CUDA device"), std::string::npos) << message;
#endif
}

}  // namespace
