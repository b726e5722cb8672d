// In a build without CUDA (DDPH_WITH_CUDA=OFF), post_localsgd and
// model_averaging refuse a CUDA bucket with DDPH_UNSUPPORTED saying so,
// before anything is sent. The bucket's pointers are never read, so none is
// real. In a build with CUDA the GPU tests (gpu_test.cpp) cover
// CUDA buckets.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "tests/support/fake_cuda_bucket.h"
#include "tests/support/multiprocess.h"
#include "tests/support/session_ranks.h"

namespace {

TEST(LocalSgdWithoutCuda, ACudaBucketIsRefusedUpFront) {
#if DDPH_TEST_WITH_CUDA
  GTEST_SKIP() << "this build has CUDA: ddph_test_post_localsgd_gpu covers CUDA buckets";
#endif
  struct Case {
    const char* hook;
    const char* name;
  };
  const Case cases[] = {
      {"{family: post_localsgd, name: post_localsgd, options: {start_localsgd_iter: 1}}",
       "post_localsgd/post_localsgd"},
      {"{family: post_localsgd, name: model_averaging, wrap: {family: default, name: "
       "allreduce}}",
       "post_localsgd/model_averaging"},
  };
  for (const Case& c : cases) {
    const std::string dir = ddph_test::make_temp_dir("ddph-lsgd-nocuda");
    ddph_session_t* s = ddph_test::open_session(
        std::string("comm: {backend: gloo, timeout: 20s}\nhook: ") + c.hook + "\n", 0, 1, dir);
    ASSERT_NE(s, nullptr) << c.hook;
    ddph_test::FakeCudaBucket fake;
    const ddph_bucket_t& b = fake.bucket;
    std::string message;
    EXPECT_EQ(ddph_test::run_bucket(s, b, &message), DDPH_UNSUPPORTED) << c.hook << ": " << message;
    EXPECT_NE(message.find(std::string(c.name) +
                           ": the buffer is CUDA memory, but this build of ddphooks has no CUDA"),
              std::string::npos)
        << message;
    ddph_session_close(s);
  }
}

}  // namespace
