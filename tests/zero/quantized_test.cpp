// protocol reduce_scatter with bits 8 and 4 (ZeRO++'s qgZ): the gradients
// travel quantized, so the parameters differ from the exact run, but by no
// more than the bound docs/zero.md states. With error feedback every
// quantization error is paid back the next step, so after T steps of plain
// SGD (lr, no momentum) on gradients that do not depend on the parameters,
//   sum of communicated means = sum of true means - mean of the ranks'
//   last residuals,
// and each residual element is at most half its channel's scale: for
// gradients in [-2, 2] at most 2 / (2^bits - 2) (the residual widens the
// range it is quantized over). A parameter is then within
// lr * 2 / (2^bits - 2) of the exact run however many steps ran. The exact
// run is computed here in double, from the model's gradients.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "tests/support/multiprocess.h"
#include "tests/support/optim_model.h"
#include "tests/support/session_ranks.h"

namespace {

using namespace ddph_test::optim;

constexpr int kSteps = 40;
constexpr double kLr = 0.1;

// Parameters after kSteps of SGD on the exact mean of world ranks' gradients.
std::vector<double> exact_sgd(int world) {
  std::vector<double> out;
  for (int p = 0; p < kParams; ++p)
    for (size_t i = 0; i < numel(p); ++i) {
      double x = initial(p, i);
      for (int t = 0; t < kSteps; ++t) {
        double sum = 0;
        for (int r = 0; r < world; ++r) sum += gradient(r, uint64_t(t), p, i);
        x -= kLr * sum / world;
      }
      out.push_back(x);
    }
  return out;
}

double residual_bound(int bits) {
  return 2.0 / double((1 << bits) - 2);
}

struct Case {
  const char* hook;
  int bits;
  int world;
  bool error_feedback;
  int channel_size = 4;
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.hook << " bits " << c.bits << " world " << c.world
      << (c.error_feedback ? " error_feedback" : " no error_feedback");
}

struct Outcome {
  double largest_error = -1;  // of any parameter from the exact run
  uint64_t bytes_out = 0;     // rank 0's, as ddph_session_stats counts them
};

// Runs the case; rank 0 reports through a file.
Outcome run_case(const Case& c) {
  const std::string config =
      yaml("optimizer: sgd, lr: 0.1, protocol: reduce_scatter, bits: " + std::to_string(c.bits) +
               ", channel_size: " + std::to_string(c.channel_size) +
               ", error_feedback: " + (c.error_feedback ? "true" : "false"),
           "{family: default, name: allreduce}", c.hook);
  const std::vector<double> want = exact_sgd(c.world);
  const std::string out = ddph_test::make_temp_dir("ddph-zero-quantized") + "/error";
  auto results = ddph_test::run_ranks(c.world, [&](int rank, int world, const std::string& dir) {
    ddph_session_t* s = ddph_test::open_session(config, rank, world, dir);
    DDPH_CHILD_CHECK(s != nullptr, "open failed");
    Model m;
    for (int step = 0; step < kSteps; ++step)
      DDPH_CHILD_CHECK(m.step(s, rank, uint64_t(step)) == DDPH_OK, "step %d", step);
    const std::vector<float> got = m.flat();
    DDPH_CHILD_CHECK(ddph_test::same_on_all_ranks(s, got.data(), got.size() * 4),
                     "parameters differ across ranks");
    double worst = 0;
    for (size_t i = 0; i < got.size(); ++i)
      worst = std::max(worst, std::fabs(double(got[i]) - want[i]));
    ddph_stats_t stats{};
    stats.struct_size = sizeof stats;
    DDPH_CHILD_CHECK(ddph_session_stats(s, &stats) == nullptr, "stats failed");
    if (rank == 0) {
      FILE* f = std::fopen(out.c_str(), "w");
      DDPH_CHILD_CHECK(f != nullptr, "cannot write %s", out.c_str());
      std::fprintf(f, "%.17g %llu\n", worst, (unsigned long long)stats.bytes_out);
      std::fclose(f);
    }
    ddph_session_close(s);
    return 0;
  });
  EXPECT_TRUE(ddph_test::all_passed(results)) << ddph_test::describe(results);
  Outcome o;
  unsigned long long bytes = 0;
  FILE* f = std::fopen(out.c_str(), "r");
  if (f == nullptr || std::fscanf(f, "%lf %llu", &o.largest_error, &bytes) != 2)
    ADD_FAILURE() << "no result in " << out;
  if (f != nullptr) std::fclose(f);
  o.bytes_out = bytes;
  return o;
}

class ZeroQuantized : public ::testing::TestWithParam<Case> {};

// Within the bound, identical on every rank, and really quantized: an exact
// reduce-scatter would come within float32 rounding (1e-5) of the exact run.
TEST_P(ZeroQuantized, ParametersStayWithinTheErrorFeedbackBoundOfTheExactRun) {
  const Case c = GetParam();
  const double bound = kLr * residual_bound(c.bits) + 1e-5;
  const double worst = run_case(c).largest_error;
  std::printf("largest distance %.3g, bound %.3g\n", worst, bound);
  EXPECT_LE(worst, bound) << "bits " << c.bits;
  EXPECT_GT(worst, 1e-4) << "no quantization error: the gradients travelled exact";
}

INSTANTIATE_TEST_SUITE_P(Hooks, ZeroQuantized,
                         ::testing::Values(Case{"zero/zero_step", 8, 2, true},
                                           Case{"zero/zero_step", 4, 2, true},
                                           Case{"zero/zero_step", 4, 3, true},
                                           Case{"zero/zero_step_interleaved", 8, 3, true},
                                           Case{"zero/zero_step_interleaved", 4, 2, true}),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return std::string(info.param.hook).substr(5) + "_bits" +
                                  std::to_string(info.param.bits) + "_world" +
                                  std::to_string(info.param.world);
                         });

// Without error feedback the errors of 40 steps add up and pass the bound
// that error feedback keeps: what the option is for.
TEST(ZeroQuantizedNoFeedback, ErrorsAccumulatePastTheFeedbackBound) {
  const Case c{"zero/zero_step", 4, 2, false};
  const double worst = run_case(c).largest_error, bound = kLr * residual_bound(4) + 1e-5;
  std::printf("largest distance %.3g, error feedback's bound %.3g\n", worst, bound);
  EXPECT_GT(worst, bound);
}

// A NaN in one rank's gradient: that bucket takes the exact reduce-scatter
// on every rank, so the NaN lands in its own parameter element only, as
// torch's step would put it, and the residuals stay as they were: every
// other parameter is still within the error-feedback bound of the exact
// run. Had the quantized mean been used, the NaN would have spoiled the
// scale of its whole channel (4 elements here).
TEST(ZeroQuantizedNonFinite, ANanTakesTheExactPathAndStaysInItsElement) {
  constexpr size_t kPoisoned = 5;  // bucket 0, parameter 0's element 5
  const std::string config =
      yaml("optimizer: sgd, lr: 0.1, protocol: reduce_scatter, bits: 8, channel_size: 4",
           "{family: default, name: allreduce}", "zero/zero_step");
  const std::vector<double> want = exact_sgd(2);
  const double bound = kLr * residual_bound(8) + 1e-5;
  auto results = ddph_test::run_ranks(2, [&](int rank, int world, const std::string& dir) {
    ddph_session_t* s = ddph_test::open_session(config, rank, world, dir);
    DDPH_CHILD_CHECK(s != nullptr, "open failed");
    Model m;
    m.edit_grads = [rank](uint64_t step, int bucket, std::vector<float>& grads) {
      if (rank == 1 && step == 3 && bucket == 0) grads[kPoisoned] = std::nanf("");
    };
    for (int step = 0; step < kSteps; ++step)
      DDPH_CHILD_CHECK(m.step(s, rank, uint64_t(step)) == DDPH_OK, "step %d", step);
    const std::vector<float> got = m.flat();
    for (size_t i = 0; i < got.size(); ++i) {
      if (i == kPoisoned) {
        DDPH_CHILD_CHECK(std::isnan(got[i]), "the poisoned element is %g, not NaN", got[i]);
        continue;
      }
      DDPH_CHILD_CHECK(std::fabs(double(got[i]) - want[i]) <= bound,
                       "element %zu is %.9g, the exact run %.9g (bound %.3g)", i, got[i], want[i],
                       bound);
    }
    ddph_session_close(s);
    return 0;
  });
  EXPECT_TRUE(ddph_test::all_passed(results)) << ddph_test::describe(results);
}

// The session's bytes out count what the zero hook sent itself (its
// wrapped allreduce never runs under reduce_scatter), and 8-bit gradients
// send fewer of them than float32 ones.
// Both count what they hand to collectives, their own range included. The
// model's buckets are tiny (36 floats), so each rank's range is one channel
// at channel_size 512; at 4 the scales of 4-float channels and the rank
// headers outweigh the codes saved.
TEST(ZeroQuantizedBytes, TheSessionCountsTheHooksOwnBytesAndQuantizedOnesAreFewer) {
  const uint64_t exact = run_case(Case{"zero/zero_step", 32, 2, true}).bytes_out;
  const uint64_t quantized = run_case(Case{"zero/zero_step", 8, 2, true, 512}).bytes_out;
  std::printf("bytes out over %d steps: float32 %llu, 8 bits %llu\n", kSteps,
              (unsigned long long)exact, (unsigned long long)quantized);
  EXPECT_GT(exact, 0u);
  EXPECT_GT(quantized, 0u);
  EXPECT_LT(quantized, exact);
}

}  // namespace
