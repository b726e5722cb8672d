// Protocol shard (FSDP2's reduce-scatter) on 2 and 3 real processes over
// Gloo: rank r's equal range [r n/W, (r+1) n/W) of the bucket holds the mean
// within the first quantization's bound (no re-quantization), for both hooks,
// bits 8 and 4; error feedback carries the residual (the mean over K steps
// of a fixed input approaches the exact mean as 1/K, without it it does
// not); a bucket that does not split into equal whole ranges is refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "tests/quantization/hooks_ranks.h"
#include "tests/support/multiprocess.h"
#include "tests/support/session_ranks.h"

namespace {

using namespace ddph_test::quant;

class Shard : public ::testing::TestWithParam<int> {};

std::vector<double> exact_mean(int world, size_t n) {
  std::vector<double> exact(n);
  for (size_t i = 0; i < n; ++i) {
    double s = 0;
    for (int r = 0; r < world; ++r) s += input(r, 0, i);
    exact[i] = s / world;
  }
  return exact;
}

TEST_P(Shard, OwnRangeHoldsTheMeanWithinTheFirstQuantizationsBound) {
  auto results = ddph_test::run_ranks(GetParam(), [&](int rank, int world, const std::string& dir) {
    const size_t n = size_t(world) * 3 * kChannel, per = n / world;
    const std::vector<double> exact = exact_mean(world, n);
    for (const char* hook : {"per_tensor", "per_channel"})
      for (int bits : {8, 4}) {
        const Config cfg{hook, "shard", bits, "nearest"};
        ddph_session_t* s = ddph_test::open_session(yaml(hook, cfg.options()), rank, world, dir);
        DDPH_CHILD_CHECK(s != nullptr, "%s: open failed", cfg.name().c_str());
        std::vector<float> x = inputs(rank, 0, n);
        std::string msg;
        DDPH_CHILD_CHECK(run_bucket_msg(s, x, 0, 0, &msg) == DDPH_OK, "%s: %s", cfg.name().c_str(),
                         msg.c_str());
        const std::vector<double> bound = error_bound(cfg, world, n);
        size_t inexact = 0;
        for (size_t i = rank * per; i < (rank + 1) * per; ++i) {
          const double err = std::fabs(double(x[i]) - exact[i]);
          DDPH_CHILD_CHECK(err <= bound[i], "%s: x[%zu]=%.9g, exact %.9g, error %g > bound %g",
                           cfg.name().c_str(), i, x[i], exact[i], err, bound[i]);
          inexact += err > 1e-6;
        }
        DDPH_CHILD_CHECK(inexact > per / 4, "%s: only %zu values look quantized",
                         cfg.name().c_str(), inexact);
        ddph_session_close(s);
      }
    return 0;
  });
  EXPECT_TRUE(ddph_test::all_passed(results)) << ddph_test::describe(results);
}

// Every step sends input(r, 0, .) + the residual; the residual telescopes,
// so the sum of K results is K x exact minus the mean of the last
// residuals, each within the first quantization's bound.
TEST_P(Shard, ErrorFeedbackCarriesTheResidual) {
  auto results = ddph_test::run_ranks(GetParam(), [&](int rank, int world, const std::string& dir) {
    const size_t n = size_t(world) * 2 * kChannel, per = n / world;
    constexpr int kSteps = 8;
    const std::vector<double> exact = exact_mean(world, n);
    const Config cfg{"per_channel", "shard", 4, "nearest"};
    const std::vector<double> bound = error_bound(cfg, world, n);
    double worst[2] = {0, 0};  // of the K-step mean's error over the bound, without / with EF
    for (int ef = 0; ef < 2; ++ef) {
      std::string options = cfg.options() + (ef ? ", error_feedback: true" : "");
      ddph_session_t* s = ddph_test::open_session(yaml(cfg.hook, options), rank, world, dir);
      DDPH_CHILD_CHECK(s != nullptr, "open failed");
      std::vector<double> sum(n, 0);
      for (int step = 0; step < kSteps; ++step) {
        std::vector<float> x = inputs(rank, 0, n);
        std::string msg;
        DDPH_CHILD_CHECK(run_bucket_msg(s, x, 0, step, &msg) == DDPH_OK, "%s", msg.c_str());
        for (size_t i = rank * per; i < (rank + 1) * per; ++i) sum[i] += x[i];
      }
      for (size_t i = rank * per; i < (rank + 1) * per; ++i)
        worst[ef] = std::max(worst[ef], std::fabs(sum[i] / kSteps - exact[i]) / bound[i]);
      ddph_session_close(s);
    }
    // With EF the K-step mean errs by at most bound / K (plus fp32 rounding).
    DDPH_CHILD_CHECK(worst[1] <= 1.5 / kSteps, "with error feedback: %g of the bound", worst[1]);
    DDPH_CHILD_CHECK(worst[0] > 2.0 / kSteps, "without: only %g of the bound", worst[0]);
    return 0;
  });
  EXPECT_TRUE(ddph_test::all_passed(results)) << ddph_test::describe(results);
}

TEST_P(Shard, RefusesABucketWithoutEqualWholeRanges) {
  auto results = ddph_test::run_ranks(GetParam(), [&](int rank, int world, const std::string& dir) {
    const Config cfg{"per_channel", "shard", 8, "nearest"};
    ddph_session_t* s = ddph_test::open_session(yaml(cfg.hook, cfg.options()), rank, world, dir);
    DDPH_CHILD_CHECK(s != nullptr, "open failed");
    std::vector<float> x = inputs(rank, 0, size_t(world) * kChannel + 1);
    std::string msg;
    DDPH_CHILD_CHECK(run_bucket_msg(s, x, 0, 0, &msg) != DDPH_OK, "accepted");
    DDPH_CHILD_CHECK(msg.find("protocol shard") != std::string::npos &&
                         msg.find("channel_size") != std::string::npos,
                     "message: %s", msg.c_str());
    ddph_session_close(s);
    return 0;
  });
  EXPECT_TRUE(ddph_test::all_passed(results)) << ddph_test::describe(results);
}

INSTANTIATE_TEST_SUITE_P(Worlds, Shard, ::testing::Values(2, 3));

}  // namespace
