// NaN, +Inf and -Inf in one rank's gradient, through every hook of every
// family on 2 real ranks over Gloo: each hook does what its doc says
// (hardening_cases.h), and never hands back finite garbage.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "tests/hardening/hardening_cases.h"
#include "tests/support/multiprocess.h"
#include "tests/support/session_ranks.h"

namespace {

using ddph_test::HookCase;
using ddph_test::NonFinite;

// Two 10 x 50 parameter views (matrices); every bad value lies in the first.
constexpr int64_t kRows = 10, kCols = 50, kN = 2 * kRows * kCols;
constexpr size_t kBad[3] = {3, 250, 499};
const std::vector<std::pair<int64_t, int64_t>> kViews = {{kRows, kCols}, {kRows, kCols}};
bool in_first_view(size_t i) {
  return i < size_t(kRows * kCols);
}
const float kBadValue[3] = {std::numeric_limits<float>::quiet_NaN(),
                            std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity()};

bool is_bad(size_t i) {
  return i == kBad[0] || i == kBad[1] || i == kBad[2];
}

std::vector<float> gradient(int rank, bool dirty) {
  std::vector<float> x(kN);
  for (size_t i = 0; i < x.size(); ++i) x[i] = ddph_test::grad_value(rank, i);
  if (dirty && rank == 0)
    for (int k = 0; k < 3; ++k) x[kBad[k]] = kBadValue[k];
  return x;
}

// Plain allreduce of 2 ranks with IEEE semantics: x0 / 2 + x1 / 2.
float allreduce_of(size_t i, bool dirty) {
  return gradient(0, dirty)[i] / 2.0f + gradient(1, dirty)[i] / 2.0f;
}

bool same_value(float a, float b) {
  return (std::isnan(a) && std::isnan(b)) || a == b;
}

std::string text(float v) {
  char s[32];
  std::snprintf(s, sizeof s, "%.9g", double(v));
  return s;
}

int check_rank(const HookCase& c, int rank, int world, const std::string& dir) {
  const std::string yaml = ddph_test::case_yaml(c);
  ddph_session_t* clean_s = ddph_test::open_session(yaml, rank, world, dir);
  DDPH_CHILD_CHECK(clean_s != nullptr, "open %s", c.name);
  ddph_session_t* dirty_s = ddph_test::open_session(yaml, rank, world, dir);
  DDPH_CHILD_CHECK(dirty_s != nullptr, "open %s again", c.name);
  ddph_test::ViewBucket clean(gradient(rank, false), kViews);
  ddph_test::ViewBucket dirty(gradient(rank, true), kViews);
  std::string msg;
  DDPH_CHILD_CHECK(ddph_test::run_bucket(clean_s, clean.b, &msg) == DDPH_OK, "clean: %s",
                   msg.c_str());
  const ddph_code_t code = ddph_test::run_bucket(dirty_s, dirty.b, &msg);
  if (c.nonfinite == NonFinite::kReported) {
    DDPH_CHILD_CHECK(code == DDPH_NONFINITE, "%s: got code %d (%s), want DDPH_NONFINITE", c.name,
                     int(code), msg.c_str());
    DDPH_CHILD_CHECK(msg.find("NaN or Inf on rank 0") != std::string::npos, "message: %s",
                     msg.c_str());
    // The session is not broken: the next clean bucket runs.
    ddph_test::ViewBucket next(gradient(rank, false), kViews);
    next.b.step = 1;
    DDPH_CHILD_CHECK(ddph_test::run_bucket(dirty_s, next.b, &msg) == DDPH_OK, "after: %s",
                     msg.c_str());
  } else {
    DDPH_CHILD_CHECK(code == DDPH_OK, "%s: %s", c.name, msg.c_str());
    const float* got = c.result_in_params ? dirty.param.data() : dirty.data.data();
    const float* want_clean = c.result_in_params ? clean.param.data() : clean.data.data();
    const std::vector<float> input = gradient(rank, true);
    for (size_t i = 0; i < size_t(kN); ++i) {
      const float ref = allreduce_of(i, true);
      switch (c.nonfinite) {
        case NonFinite::kAsAllreduce:
          DDPH_CHILD_CHECK(same_value(got[i], ref), "%s [%zu]: %s, allreduce gives %s", c.name, i,
                           text(got[i]).c_str(), text(ref).c_str());
          break;
        case NonFinite::kElementwise:
          if (is_bad(i))
            DDPH_CHILD_CHECK(same_value(got[i], ref), "%s [%zu]: %s, allreduce gives %s", c.name, i,
                             text(got[i]).c_str(), text(ref).c_str());
          else
            DDPH_CHILD_CHECK(std::memcmp(&got[i], &want_clean[i], 4) == 0,
                             "%s [%zu]: %s, the clean bucket gives %s", c.name, i,
                             text(got[i]).c_str(), text(want_clean[i]).c_str());
          break;
        case NonFinite::kAllreduceInMatrix:
          if (in_first_view(i))
            DDPH_CHILD_CHECK(same_value(got[i], ref),
                             "%s [%zu] in the bad matrix: %s, allreduce %s", c.name, i,
                             text(got[i]).c_str(), text(ref).c_str());
          else
            DDPH_CHILD_CHECK(std::memcmp(&got[i], &want_clean[i], 4) == 0,
                             "%s [%zu] in the clean matrix: %s, the clean bucket gives %s", c.name,
                             i, text(got[i]).c_str(), text(want_clean[i]).c_str());
          break;
        case NonFinite::kLocal:
          DDPH_CHILD_CHECK(std::memcmp(&got[i], &input[i], 4) == 0, "%s [%zu] changed", c.name, i);
          break;
        case NonFinite::kReported:
          break;
      }
    }
    // The optimizer steps each parameter with its averaged gradient: a bad
    // one makes that parameter element non-finite and leaves the others.
    for (size_t i = 0; c.steps_params && i < size_t(kN); ++i) {
      if (is_bad(i))
        DDPH_CHILD_CHECK(!std::isfinite(dirty.param[i]), "%s: param [%zu] is %s", c.name, i,
                         text(dirty.param[i]).c_str());
      else
        DDPH_CHILD_CHECK(std::memcmp(&dirty.param[i], &clean.param[i], 4) == 0,
                         "%s: param [%zu] is %s, %s after a clean bucket", c.name, i,
                         text(dirty.param[i]).c_str(), text(clean.param[i]).c_str());
    }
    if (c.nonfinite != NonFinite::kLocal)
      DDPH_CHILD_CHECK(ddph_test::same_on_all_ranks(dirty_s, got, kN * sizeof(float)),
                       "%s: ranks disagree", c.name);
  }
  ddph_session_close(dirty_s);
  ddph_session_close(clean_s);
  return 0;
}

// With error feedback and warm start (PowerSGD's defaults), a NaN step
// leaves NaN in that matrix's error at the bad positions: the matrix is
// averaged uncompressed on that step and the following ones, with NaN/Inf
// exactly there on every rank and finite values elsewhere, as in a plain
// allreduce; the other matrix comes back bit for bit as in a run that never
// saw the bad step.
TEST(PowerSgdNonFinite, MemoryKeepsTheNaNWhereItWasOnLaterSteps) {
  auto results = ddph_test::run_ranks(
      2,
      [](int rank, int world, const std::string& dir) {
        const std::string yaml =
            "comm: {backend: gloo, timeout: 20s}\n"
            "hook: {family: powersgd, name: powersgd, options: {start_iter: 2}}\n";
        ddph_session_t* s = ddph_test::open_session(yaml, rank, world, dir);
        ddph_session_t* clean_s = ddph_test::open_session(yaml, rank, world, dir);
        DDPH_CHILD_CHECK(s != nullptr && clean_s != nullptr, "open");
        for (uint64_t step = 0; step < 5; ++step) {
          ddph_test::ViewBucket b(gradient(rank, step == 2), kViews);
          ddph_test::ViewBucket clean(gradient(rank, false), kViews);
          b.b.step = clean.b.step = step;
          std::string msg;
          DDPH_CHILD_CHECK(ddph_test::run_bucket(s, b.b, &msg) == DDPH_OK, "step %d: %s", int(step),
                           msg.c_str());
          DDPH_CHILD_CHECK(ddph_test::run_bucket(clean_s, clean.b, &msg) == DDPH_OK,
                           "clean step %d: %s", int(step), msg.c_str());
          for (size_t i = 0; i < size_t(kN); ++i) {
            if (!in_first_view(i)) {
              DDPH_CHILD_CHECK(std::memcmp(&b.data[i], &clean.data[i], 4) == 0,
                               "step %d [%zu] in the other matrix: %s, a clean run gives %s",
                               int(step), i, text(b.data[i]).c_str(), text(clean.data[i]).c_str());
              continue;
            }
            const bool bad_here = step >= 2 && is_bad(i);
            DDPH_CHILD_CHECK(std::isfinite(b.data[i]) != bad_here, "step %d [%zu]: %s", int(step),
                             i, text(b.data[i]).c_str());
          }
          DDPH_CHILD_CHECK(ddph_test::same_on_all_ranks(s, b.data.data(), kN * sizeof(float)),
                           "step %d: ranks disagree", int(step));
        }
        ddph_session_close(clean_s);
        ddph_session_close(s);
        return 0;
      },
      120);
  EXPECT_TRUE(ddph_test::all_passed(results)) << ddph_test::describe(results);
}

class NonFiniteGradients : public ::testing::TestWithParam<HookCase> {};

TEST_P(NonFiniteGradients, DoWhatTheHookDocumentsOnEveryRank) {
  const HookCase c = GetParam();
  auto results = ddph_test::run_ranks(
      2,
      [&c](int rank, int world, const std::string& dir) { return check_rank(c, rank, world, dir); },
      120);
  EXPECT_TRUE(ddph_test::all_passed(results)) << c.name << ": " << ddph_test::describe(results);
}

INSTANTIATE_TEST_SUITE_P(Gloo2, NonFiniteGradients, ::testing::ValuesIn(ddph_test::hook_cases()),
                         [](const ::testing::TestParamInfo<HookCase>& i) { return i.param.name; });

}  // namespace
