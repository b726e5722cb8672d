// A CUDA bucket reaching the quantization hooks where it cannot run: in a
// build without CUDA, or on a host without a usable GPU. Either way the
// answer is DDPH_UNSUPPORTED saying why, before any byte of the buffer is
// touched (the pointer here is not memory at all), and the session lives on.
// On a host with a GPU this test skips: gpu_hooks_test covers that case.
// A bucket in pinned host memory (kDLCUDAHost) is host memory, and runs the
// host path.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "tests/quantization/hooks_ranks.h"
#include "tests/support/fake_cuda_bucket.h"
#include "tests/support/multiprocess.h"
#include "tests/support/session_ranks.h"
#if DDPH_TEST_WITH_CUDA
#include "tests/support/cuda_device.h"
#endif

namespace {

TEST(QuantCudaBucket, WithoutCudaOrAGpuIsAClearErrorAndTheSessionGoesOn) {
#if DDPH_TEST_WITH_CUDA
  if (ddph_test::no_cuda_device_reason().empty()) GTEST_SKIP() << "a GPU is present";
  const char* expected = "no usable CUDA device";
#else
  const char* expected = "has no CUDA (DDPH_WITH_CUDA was off";
#endif
  for (const char* options :
       {"protocol: allgather", "protocol: reduce_scatter, bits: 4, error_feedback: true"}) {
    SCOPED_TRACE(options);
    ddph_session_t* s = ddph_test::open_session(ddph_test::quant::yaml("per_channel", options), 0,
                                                1, ddph_test::make_temp_dir("ddph-qcuda"));
    ASSERT_NE(s, nullptr);
    ddph_test::FakeCudaBucket fake;
    const ddph_bucket_t& b = fake.bucket;
    std::string message;
    EXPECT_EQ(ddph_test::run_bucket(s, b, &message), DDPH_UNSUPPORTED) << message;
    EXPECT_NE(message.find(expected), std::string::npos) << message;
    EXPECT_NE(message.find("quantization"), std::string::npos) << message;
    // A host bucket still runs on the same session afterwards.
    std::vector<float> x = ddph_test::quant::inputs(0, 0, 1000);
    EXPECT_EQ(ddph_test::quant::run_bucket_msg(s, x, 0, 0, nullptr), DDPH_OK);
    ddph_session_close(s);
  }
}

TEST(QuantCudaBucket, APinnedHostBucketRunsTheHostPath) {
  ddph_session_t* s = ddph_test::open_session(
      ddph_test::quant::yaml("per_channel", "protocol: reduce_scatter, bits: 4"), 0, 1,
      ddph_test::make_temp_dir("ddph-qcuda"));
  ASSERT_NE(s, nullptr);
  const std::vector<float> x = ddph_test::quant::inputs(0, 0, 1000);
  std::vector<float> plain = x, pinned = x;
  ASSERT_EQ(ddph_test::quant::run_bucket_msg(s, plain, 0, 0, nullptr), DDPH_OK);
  ddph_test::FloatBucket b(pinned, 0, 0, true);
  b.bucket.buffer.device = {kDLCUDAHost, 0};  // the label only: the memory is the host's
  std::string message;
  ASSERT_EQ(ddph_test::run_bucket(s, b.bucket, &message), DDPH_OK) << message;
  EXPECT_EQ(std::memcmp(pinned.data(), plain.data(), 4 * x.size()), 0);
  EXPECT_NE(std::memcmp(plain.data(), x.data(), 4 * x.size()), 0);  // 4 bits changed values
  ddph_session_close(s);
}

}  // namespace
