// The default and debugging hooks on 2 and 3 real processes over Gloo,
// through the loader's public session API, against exact arithmetic.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstring>

#include "tests/support/multiprocess.h"
#include "tests/support/session_ranks.h"

namespace {

using ddph_test::FloatBucket;

std::string yaml_for(const std::string& hook_block, const char* timeout = "20s") {
  return std::string("comm: {backend: gloo, timeout: ") + timeout + "}\n" + hook_block;
}

// Deterministic, rank-dependent gradient values in [-2, 2) that fp16 and
// bf16 cannot represent exactly.
float grad_value(int rank, size_t i) {
  uint32_t x = uint32_t(i) * 2654435761u ^ uint32_t(rank + 1) * 40503u;
  x ^= x >> 13;
  x *= 0x5bd1e995u;
  x ^= x >> 15;
  return float(x % 1000003u) / 1000003.0f * 4.0f - 2.0f;
}

double exact_mean(int world, size_t i) {
  double s = 0;
  for (int r = 0; r < world; ++r) s += grad_value(r, i);
  return s / world;
}

class WorldSize : public ::testing::TestWithParam<int> {};

// allreduce divides by the world size, then sums: with inputs that are
// multiples of the world size every step is exact, so the mean must be too.
TEST_P(WorldSize, AllreduceGivesTheExactMean) {
  auto results = ddph_test::run_ranks(GetParam(), [](int rank, int world, const std::string& dir) {
    ddph_session_t* s = ddph_test::open_session(
        yaml_for("hook: {family: default, name: allreduce}\n"), rank, world, dir);
    DDPH_CHILD_CHECK(s != nullptr, "open failed");
    for (uint64_t step = 0; step < 3; ++step) {
      std::vector<float> a(10007), b(333);
      for (size_t i = 0; i < a.size(); ++i) a[i] = float(world * (rank + 1) * (int(i % 97) - 48));
      for (size_t i = 0; i < b.size(); ++i) b[i] = float(world * (rank * 7 + int(i)));
      FloatBucket ba(a, 0, step, false), bb(b, 1, step, true);
      DDPH_CHILD_CHECK(ddph_test::run_bucket(s, ba) == DDPH_OK, "bucket 0");
      DDPH_CHILD_CHECK(ddph_test::run_bucket(s, bb) == DDPH_OK, "bucket 1");
      const int tri = world * (world + 1) / 2;  // sum of (rank + 1)
      for (size_t i = 0; i < a.size(); ++i)
        DDPH_CHILD_CHECK(a[i] == float(tri * (int(i % 97) - 48)), "a[%zu]=%g", i, a[i]);
      for (size_t i = 0; i < b.size(); ++i) {
        // mean of world * (7 r + i) over r, times world / world
        const double want = double(world) * (7.0 * (world - 1) * world / 2 + world * double(i)) / world;
        DDPH_CHILD_CHECK(b[i] == float(want), "b[%zu]=%g want %g", i, b[i], want);
      }
    }
    ddph_stats_t st{};
    st.struct_size = sizeof st;
    ddph_error_t* e = ddph_session_stats(s, &st);
    DDPH_CHILD_CHECK(e == nullptr, "stats");
    DDPH_CHILD_CHECK(st.buckets == 6 && st.steps == 3, "buckets %llu steps %llu",
                     (unsigned long long)st.buckets, (unsigned long long)st.steps);
    DDPH_CHILD_CHECK(st.wire_bytes >= (10007 + 333) * 4 * 3 / 2, "wire bytes %llu",
                     (unsigned long long)st.wire_bytes);
    ddph_session_close(s);
    return 0;
  });
  EXPECT_TRUE(ddph_test::all_passed(results)) << ddph_test::describe(results);
}

// Low-precision hooks stay within their dtype's rounding of the exact mean,
// are identical on every rank, and the wrapper around allreduce computes the
// same thing as the fused compress hook (cast, divide, sum, cast back).
struct LowPrecisionCase {
  const char* compress;
  const char* wrapper;
  double tolerance;  // relative to max |x|: a few roundings of the dtype's epsilon
};

void check_low_precision(const LowPrecisionCase& c, int world) {
  auto results = ddph_test::run_ranks(world, [&c](int rank, int world, const std::string& dir) {
    ddph_session_t* fused = ddph_test::open_session(
        yaml_for(std::string("hook: {family: default, name: ") + c.compress + "}\n"), rank, world, dir);
    DDPH_CHILD_CHECK(fused != nullptr, "open %s", c.compress);
    ddph_session_t* wrapped = ddph_test::open_session(
        yaml_for(std::string("hook:\n  family: default\n  name: ") + c.wrapper +
                 "\n  wrap: {family: default, name: allreduce}\n"),
        rank, world, dir);
    DDPH_CHILD_CHECK(wrapped != nullptr, "open %s", c.wrapper);
    const size_t n = 50021;
    std::vector<float> x(n), y(n);
    for (size_t i = 0; i < n; ++i) x[i] = y[i] = grad_value(rank, i);
    FloatBucket bx(x, 0, 0, true), by(y, 0, 0, true);
    DDPH_CHILD_CHECK(ddph_test::run_bucket(fused, bx) == DDPH_OK, "%s", c.compress);
    DDPH_CHILD_CHECK(ddph_test::run_bucket(wrapped, by) == DDPH_OK, "%s", c.wrapper);
    double worst = 0;
    size_t inexact = 0;
    for (size_t i = 0; i < n; ++i) {
      const double want = exact_mean(world, i);
      worst = std::max(worst, std::fabs(x[i] - want));
      inexact += double(x[i]) != want;
    }
    DDPH_CHILD_CHECK(worst <= c.tolerance * 2.0, "%s: worst error %g > %g", c.compress, worst,
                     c.tolerance * 2.0);
    DDPH_CHILD_CHECK(inexact > n / 2, "%s: result looks unrounded (%zu of %zu inexact)",
                     c.compress, inexact, n);
    DDPH_CHILD_CHECK(std::memcmp(x.data(), y.data(), n * sizeof(float)) == 0,
                     "%s(allreduce) differs from %s", c.wrapper, c.compress);
    DDPH_CHILD_CHECK(ddph_test::same_on_all_ranks(fused, x.data(), n * sizeof(float)),
                     "%s: ranks disagree", c.compress);
    ddph_session_close(wrapped);
    ddph_session_close(fused);
    return 0;
  });
  EXPECT_TRUE(ddph_test::all_passed(results)) << c.compress << ": " << ddph_test::describe(results);
}

TEST_P(WorldSize, Fp16CompressAndWrapperAreWithinFp16Tolerance) {
  // fp16 has a 2^-11 relative step; values reach 2, each rank's term and
  // every partial sum is rounded once.
  check_low_precision({"fp16_compress", "fp16_wrapper", 4 * std::ldexp(1.0, -11)}, GetParam());
}

TEST_P(WorldSize, Bf16CompressAndWrapperAreWithinBf16Tolerance) {
  check_low_precision({"bf16_compress", "bf16_wrapper", 4 * std::ldexp(1.0, -8)}, GetParam());
}

TEST_P(WorldSize, NoopLeavesTheBufferUnchanged) {
  auto results = ddph_test::run_ranks(GetParam(), [](int rank, int world, const std::string& dir) {
    ddph_session_t* s = ddph_test::open_session(
        yaml_for("hook: {family: debugging, name: noop}\n"), rank, world, dir);
    DDPH_CHILD_CHECK(s != nullptr, "open failed");
    std::vector<float> x(4096);
    for (size_t i = 0; i < x.size(); ++i) x[i] = grad_value(rank, i);
    const std::vector<float> before = x;
    FloatBucket b(x, 0, 0, true);
    DDPH_CHILD_CHECK(ddph_test::run_bucket(s, b) == DDPH_OK, "noop");
    DDPH_CHILD_CHECK(std::memcmp(x.data(), before.data(), x.size() * 4) == 0, "noop changed data");
    ddph_session_close(s);
    return 0;
  });
  EXPECT_TRUE(ddph_test::all_passed(results)) << ddph_test::describe(results);
}

// A rule sends small buckets through exact allreduce and the rest through
// fp16: the small one comes back exact, the large one rounded.
TEST_P(WorldSize, RulesPickTheHookByBucketSize) {
  auto results = ddph_test::run_ranks(GetParam(), [](int rank, int world, const std::string& dir) {
    ddph_session_t* s = ddph_test::open_session(
        yaml_for("hook: {family: default, name: fp16_compress}\n"
                 "rules:\n"
                 "  - when: {max_bytes: 4096}\n"
                 "    hook: {family: default, name: allreduce}\n"),
        rank, world, dir);
    DDPH_CHILD_CHECK(s != nullptr, "open failed");
    // 1 + 2^-20 is exact in fp32 and rounds to 1 in fp16.
    const float v = float(world) * (1.0f + std::ldexp(1.0f, -20));
    std::vector<float> small(1024, v), large(1025, v);
    FloatBucket bs(small, 0, 0, false), bl(large, 1, 0, true);
    DDPH_CHILD_CHECK(ddph_test::run_bucket(s, bs) == DDPH_OK, "small");
    DDPH_CHILD_CHECK(ddph_test::run_bucket(s, bl) == DDPH_OK, "large");
    DDPH_CHILD_CHECK(small[0] == v, "small bucket %.9g, want exact %.9g", small[0], v);
    DDPH_CHILD_CHECK(large[0] != v && std::fabs(large[0] - v) < 0.01f * v,
                     "large bucket %.9g should be fp16-rounded near %.9g", large[0], v);
    ddph_session_close(s);
    (void)rank;
    return 0;
  });
  EXPECT_TRUE(ddph_test::all_passed(results)) << ddph_test::describe(results);
}

INSTANTIATE_TEST_SUITE_P(Gloo, WorldSize, ::testing::Values(2, 3),
                         [](const ::testing::TestParamInfo<int>& i) {
                           return "world" + std::to_string(i.param);
                         });

// Kill one rank mid-job: the survivors get DDPH_COMM_FAILURE or DDPH_TIMEOUT
// within the configured timeout, and the session stays failed.
TEST(FaultTolerance, KilledRankGivesSurvivorsAnErrorWithinTheTimeout) {
  constexpr double kTimeoutS = 4.0;
  auto results = ddph_test::run_ranks(3, [](int rank, int world, const std::string& dir) {
    ddph_session_t* s = ddph_test::open_session(
        yaml_for("hook: {family: default, name: allreduce}\n", "4s"), rank, world, dir);
    DDPH_CHILD_CHECK(s != nullptr, "open failed");
    std::vector<float> x(1 << 18, 1.0f);
    for (uint64_t step = 0; step < 2; ++step) {
      FloatBucket b(x, 0, step, true);
      DDPH_CHILD_CHECK(ddph_test::run_bucket(s, b) == DDPH_OK, "healthy step %d", int(step));
    }
    if (rank == 2) raise(SIGKILL);  // dies without closing anything
    const auto t0 = std::chrono::steady_clock::now();
    ddph_code_t code = DDPH_OK;
    for (uint64_t step = 2; step < 50 && code == DDPH_OK; ++step) {
      FloatBucket b(x, 0, step, true);
      code = ddph_test::run_bucket(s, b);
    }
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    DDPH_CHILD_CHECK(code == DDPH_COMM_FAILURE || code == DDPH_TIMEOUT, "code %d", int(code));
    DDPH_CHILD_CHECK(waited < kTimeoutS + 2.0, "error took %.2f s", waited);
    // The session is broken from now on, and says so at once.
    FloatBucket again(x, 0, 99, true);
    const auto t1 = std::chrono::steady_clock::now();
    DDPH_CHILD_CHECK(ddph_test::run_bucket(s, again) == DDPH_COMM_FAILURE, "not broken");
    // At once: well inside the timeout a healthy session would wait.
    DDPH_CHILD_CHECK(std::chrono::steady_clock::now() - t1 <
                         std::chrono::duration<double>(kTimeoutS / 2),
                     "slow");
    ddph_session_close(s);
    return 0;
  }, 60.0);
  ASSERT_EQ(results.size(), 3u);
  EXPECT_EQ(results[2].signal, SIGKILL);
  EXPECT_EQ(results[0].exit_code, 0) << ddph_test::describe(results);
  EXPECT_EQ(results[1].exit_code, 0) << ddph_test::describe(results);
}

// Opens an allreduce session of `world` ranks as rank 0, with neither a
// rendezvous nor a store.
ddph_error_t* open_without_rendezvous(int world, ddph_session_t** s) {
  const std::string yaml = yaml_for("hook: {family: default, name: allreduce}\n");
  ddph_session_options_t o{};
  o.struct_size = sizeof o;
  o.yaml_text = yaml.c_str();
  o.rank = 0;
  o.world_size = world;
  return ddph_session_open(&o, s);
}

// A world of one meets nobody: it opens without comm.rendezvous or a store,
// and its allreduce returns the bucket (the mean of one value).
TEST(WorldOfOne, NeedsNoRendezvous) {
  ddph_session_t* s = nullptr;
  ddph_error_t* e = open_without_rendezvous(1, &s);
  ASSERT_EQ(e, nullptr) << ddph_error_message(e);
  std::vector<float> a(1000);
  for (size_t i = 0; i < a.size(); ++i) a[i] = grad_value(0, i);
  const std::vector<float> before = a;
  FloatBucket b(a, 0, 0, true);
  EXPECT_EQ(ddph_test::run_bucket(s, b), DDPH_OK);
  EXPECT_EQ(a, before);
  ddph_session_close(s);
}

// Two ranks without a rendezvous: the error names the YAML key to set.
TEST(WorldOfOne, TwoRanksWithoutARendezvousAreToldWhichKeyToSet) {
  ddph_session_t* s = nullptr;
  ddph_error_t* e = open_without_rendezvous(2, &s);
  EXPECT_EQ(s, nullptr);
  EXPECT_EQ(ddph_error_code(e), DDPH_INVALID_ARGUMENT);
  const std::string message = ddph_error_message(e);
  EXPECT_NE(message.find("2 ranks need a rendezvous: set comm.rendezvous in the YAML"),
            std::string::npos)
      << message;
  ddph_error_free(e);
}

}  // namespace
