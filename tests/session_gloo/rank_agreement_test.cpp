// Ranks that disagree get an error on every rank, not a crash, a hang or a
// silently wrong result: a different hook configuration at open, different
// buckets (size or dtype) at the first step or when a layout changes.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/support/multiprocess.h"
#include "tests/support/session_ranks.h"

namespace {

// The open's error text, prefixed "WRONG CODE " unless DDPH_INVALID_ARGUMENT;
// "" when it opened.
std::string open_error(const std::string& yaml, int rank, int world, const std::string& dir) {
  const ddph_test::OpenOutcome o = ddph_test::open_outcome(yaml, rank, world, dir);
  if (o.code == DDPH_OK) return "";
  return (o.code == DDPH_INVALID_ARGUMENT ? "" : "WRONG CODE ") + o.message;
}

TEST(RankAgreement, DifferentHookConfigsFailEveryRankAtOpen) {
  auto res = ddph_test::run_ranks(3, [](int rank, int world, const std::string& dir) {
    const std::string hook = rank == 2
                                 ? "{family: quantization, name: per_channel, options: {bits: 4}}"
                                 : "{family: quantization, name: per_channel, options: {bits: 8}}";
    const std::string msg =
        open_error("comm: {backend: gloo, timeout: 20s}\nhook: " + hook + "\n", rank, world, dir);
    DDPH_CHILD_CHECK(msg.find("the ranks disagree on the hook configuration: rank 2 differ") == 0,
                     "rank %d: '%s'", rank, msg.c_str());
    DDPH_CHILD_CHECK(msg.find(rank == 2 ? "bits=4" : "bits=8") != std::string::npos,
                     "rank %d: its own configuration is not shown: '%s'", rank, msg.c_str());
    return 0;
  });
  EXPECT_TRUE(ddph_test::all_passed(res)) << ddph_test::describe(res);
}

TEST(RankAgreement, SameConfigWithDifferentCommOptionsOpens) {
  auto res = ddph_test::run_ranks(2, [](int rank, int world, const std::string& dir) {
    // The address to listen on is a rank's own business.
    const std::string y = std::string("comm: {backend: gloo, timeout: 20s, options: {hostname: ") +
                          (rank == 0 ? "127.0.0.1" : "localhost") +
                          "}}\nhook: {family: default, name: allreduce}\n";
    const std::string msg = open_error(y, rank, world, dir);
    DDPH_CHILD_CHECK(msg.empty(), "rank %d: %s", rank, msg.c_str());
    return 0;
  });
  EXPECT_TRUE(ddph_test::all_passed(res)) << ddph_test::describe(res);
}

TEST(RankAgreement, DifferentBucketsFailEveryRankThenAgreeingOnesRun) {
  auto res = ddph_test::run_ranks(2, [](int rank, int world, const std::string& dir) {
    ddph_session_t* s = ddph_test::open_session(
        "comm: {backend: gloo, timeout: 20s}\nhook: {family: default, name: allreduce}\n", rank,
        world, dir);
    DDPH_CHILD_CHECK(s != nullptr, "open");
    // Bucket 0: one element more on rank 1.
    std::vector<float> x(rank == 1 ? 1001 : 1000, 2.0f);
    ddph_test::FloatBucket b(x, 0, 0, true);
    DDPH_CHILD_CHECK(ddph_test::run_bucket(s, b) == DDPH_INVALID_ARGUMENT, "sizes accepted");
    DDPH_CHILD_CHECK(x[0] == 2.0f, "a refused bucket was changed");
    // Bucket 0 again, now the same everywhere: it runs.
    std::vector<float> y(1000, float(rank + 1));
    ddph_test::FloatBucket c(y, 0, 1, true);
    DDPH_CHILD_CHECK(ddph_test::run_bucket(s, c) == DDPH_OK, "agreeing bucket");
    DDPH_CHILD_CHECK(y[999] == 1.5f, "mean %g", double(y[999]));
    // Bucket 0 changes layout on every rank, to different dtypes: the new
    // layout is checked again.
    std::vector<double> d(1000, 1.0);
    std::vector<float> f(1000, 1.0f);
    ddph_test::FloatBucket e(f, 0, 2, true);
    if (rank == 0) {
      e.bucket.buffer.data = d.data();
      e.bucket.buffer.dtype = {kDLFloat, 64, 1};
    } else {
      e.bucket.buffer.shape[0] = 999;
    }
    DDPH_CHILD_CHECK(ddph_test::run_bucket(s, e) == DDPH_INVALID_ARGUMENT, "dtypes accepted");
    ddph_session_close(s);
    return 0;
  });
  EXPECT_TRUE(ddph_test::all_passed(res)) << ddph_test::describe(res);
}

}  // namespace
