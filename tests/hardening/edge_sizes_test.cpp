// Zero-length and one-element buckets through every hook of every family on
// 2 real ranks over Gloo: no crash, completion, and the mean (or, for noop,
// the untouched bucket) for two steps.
#include <gtest/gtest.h>

#include <cmath>

#include "tests/hardening/hardening_cases.h"
#include "tests/support/multiprocess.h"
#include "tests/support/session_ranks.h"

namespace {

using ddph_test::HookCase;
using ddph_test::NonFinite;

int check_rank(const HookCase& c, int rank, int world, const std::string& dir) {
  ddph_session_t* s = ddph_test::open_session(ddph_test::case_yaml(c), rank, world, dir);
  DDPH_CHILD_CHECK(s != nullptr, "open %s", c.name);
  for (uint64_t step = 0; step < 2; ++step) {
    // Bucket 0 is empty, bucket 1 holds one element.
    ddph_test::ViewBucket empty({}, {{0, 1}});
    empty.b.index = 0;
    empty.b.step = step;
    empty.b.is_last = 0;
    const float mine = ddph_test::grad_value(rank, step);
    ddph_test::ViewBucket one({mine}, {{1, 1}});
    one.b.index = 1;
    one.b.step = step;
    std::string msg;
    DDPH_CHILD_CHECK(ddph_test::run_bucket(s, empty.b, &msg) == DDPH_OK,
                     "%s: empty bucket, step %d: %s", c.name, int(step), msg.c_str());
    DDPH_CHILD_CHECK(ddph_test::run_bucket(s, one.b, &msg) == DDPH_OK,
                     "%s: one element, step %d: %s", c.name, int(step), msg.c_str());
    const float got = c.result_in_params ? one.param[0] : one.data[0];
    double want = 0;
    for (int r = 0; r < world; ++r) want += ddph_test::grad_value(r, step);
    want /= world;
    if (c.nonfinite == NonFinite::kLocal) want = mine;
    DDPH_CHILD_CHECK(std::fabs(got - want) <= c.tolerance * 2.0, "%s step %d: %.9g, want %.9g",
                     c.name, int(step), double(got), want);
  }
  ddph_session_close(s);
  return 0;
}

class EdgeSizes : public ::testing::TestWithParam<HookCase> {};

TEST_P(EdgeSizes, EmptyAndOneElementBucketsGiveTheMean) {
  const HookCase c = GetParam();
  auto results = ddph_test::run_ranks(
      2,
      [&c](int rank, int world, const std::string& dir) { return check_rank(c, rank, world, dir); },
      120);
  EXPECT_TRUE(ddph_test::all_passed(results)) << c.name << ": " << ddph_test::describe(results);
}

INSTANTIATE_TEST_SUITE_P(Gloo2, EdgeSizes, ::testing::ValuesIn(ddph_test::hook_cases()),
                         [](const ::testing::TestParamInfo<HookCase>& i) { return i.param.name; });

}  // namespace
