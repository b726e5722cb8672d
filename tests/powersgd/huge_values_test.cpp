// Finite gradients with huge values (+-3e38, FLT_MAX, among ordinary ones)
// through both PowerSGD hooks at ranks 1, 2 and 4, with error feedback on
// and off, on 2 real ranks over Gloo, for 6 steps (compressed from step 2):
// every step completes, every value is finite and the same on both ranks
// (docs/powersgd.md, "Huge values"). A matrix holding them is averaged
// uncompressed: plain allreduce's bits on the step they appear; the steps
// after give the exact mean of gradients PowerSGD compresses exactly, so no
// memory was poisoned; and with error feedback the outputs plus the final
// error equal the sum of the exact means. References are computed here.
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "tests/powersgd/psgd_support.h"
#include "tests/support/multiprocess.h"
#include "tests/support/session_ranks.h"

namespace {

using namespace ddph_test::psgd;

// Two 10 x 50 matrices and a bias: 1064 elements, a 33 x 33 square for
// batched_powersgd (the last of its rows holds 8 elements and 25 zeros).
const std::vector<Shape> kShapes = {{10, 50}, {10, 50}, {64}};
constexpr size_t kN = 1064, kSide = 33, kFirst = 500;  // kFirst: the first matrix
constexpr int kSteps = 6, kStart = 2;

enum class Pattern {
  kAgree,     // step 2 only: the same huge values on both ranks (their sum overflows)
  kDisagree,  // step 2 only: +-3e38 and +-FLT_MAX of opposite signs (mean 0)
  kSteady,    // every step: the same huge values on both ranks
};
const char* name_of(Pattern p) {
  return p == Pattern::kAgree ? "agree" : (p == Pattern::kDisagree ? "disagree" : "steady");
}

float wave(size_t i, int salt) {
  return std::sin(0.37f * float(i) + 0.11f * float(salt)) + 0.5f;
}

// Ordinary gradients whose sum over ranks PowerSGD compresses exactly:
// each matrix (batched: the square) is c_r (u v^T + u' v'^T) with the
// vectors the same on every rank, of rank 1 for PowerSGD's rank 1 and 2
// above (Gram-Schmidt needs the full rank, QR does not).
struct Ordinary {
  bool batched;
  int terms;  // 1 or 2
  float operator()(int rank, int step, size_t i) const {
    const float c = float(rank + 1) * (1.0f + 0.25f * float(step));
    size_t row, col;
    int salt;
    if (batched) {
      row = i / kSide, col = i % kSide, salt = 0;
      // The last row is part zero-padding: zero the whole of it.
      if (row + 1 == kSide) return 0.0f;
    } else if (i >= 2 * kFirst) {
      return c * wave(i, 3);  // the bias
    } else {
      row = (i % kFirst) / 50, col = i % 50, salt = int(i / kFirst) * 4;
    }
    float v = wave(row, salt + 4) * wave(col, salt + 5);
    if (terms == 2) v += wave(row, salt + 6) * std::cos(float(col) + 0.3f * float(salt));
    return c * v;
  }
};

bool huge_step(Pattern p, int step) {
  return p == Pattern::kSteady || step == kStart;
}

// The huge values go into the first matrix (batched: the first 500 values)
// and the bias.
float gradient(Pattern p, const Ordinary& ordinary, int rank, int step, size_t i) {
  const float x = ordinary(rank, step, i);
  if (!huge_step(p, step)) return x;
  const float sign = p == Pattern::kDisagree && rank == 1 ? -1.0f : 1.0f;
  if (i < kFirst) {
    if (i % 7 == 0) return sign * 3e38f;
    if (i == 3) return sign * FLT_MAX;
    if (i == 4) return -sign * 2.5e38f;
  }
  if (i == 2 * kFirst) return sign * FLT_MAX;  // in the bias: the uncompressed sum overflows
  return x;
}

std::vector<float> gradients(Pattern p, const Ordinary& o, int rank, int step) {
  std::vector<float> v(kN);
  for (size_t i = 0; i < kN; ++i) v[i] = gradient(p, o, rank, step, i);
  return v;
}

double exact_mean(Pattern p, const Ordinary& o, int step, size_t i) {
  return (double(gradient(p, o, 0, step, i)) + gradient(p, o, 1, step, i)) / 2;
}

// Plain allreduce of 2 ranks: x0 / 2 + x1 / 2 in float.
float allreduce_of(Pattern p, const Ordinary& o, int step, size_t i) {
  return gradient(p, o, 0, step, i) / 2.0f + gradient(p, o, 1, step, i) / 2.0f;
}

// The elements of the matrix that holds the huge values: averaged
// uncompressed when it does.
bool in_huge_matrix(bool batched, size_t i) {
  return batched || i < kFirst;
}

std::string text(float v) {
  char s[32];
  std::snprintf(s, sizeof s, "%.9g", double(v));
  return s;
}

int run_case(const std::string& hook, int rank_opt, bool ef, Pattern p, int rank, int world,
             const std::string& dir) {
  const bool batched = hook == "batched_powersgd";
  const Ordinary o{batched, rank_opt == 1 ? 1 : 2};
  const std::string options = "rank: " + std::to_string(rank_opt) +
                              ", start_iter: " + std::to_string(kStart) +
                              ", error_feedback: " + (ef ? "true" : "false");
  const std::string what = hook + " {" + options + "} " + name_of(p);
  ddph_session_t* s = ddph_test::open_session(yaml(hook, options), rank, world, dir);
  DDPH_CHILD_CHECK(s != nullptr, "open %s", what.c_str());
  std::vector<double> out_sum(kN, 0.0), truth(kN, 0.0);
  double scale = 0;  // of the ordinary values
  for (int step = 0; step < kSteps; ++step) {
    std::vector<float> x = gradients(p, o, rank, step);
    std::string msg;
    DDPH_CHILD_CHECK(run_shaped(s, x, kShapes, 0, uint64_t(step), true, &msg) == DDPH_OK,
                     "%s step %d: %s", what.c_str(), step, msg.c_str());
    DDPH_CHILD_CHECK(ddph_test::same_on_all_ranks(s, x.data(), kN * sizeof(float)),
                     "%s step %d: ranks differ", what.c_str(), step);
    for (size_t i = 0; i < kN; ++i) scale = std::max(scale, std::fabs(double(o(0, step, i))) * 2);
    // Error feedback carries opposite huge values on after they appear: the
    // ordinary values are lost beside them, and the identity below checks.
    const bool carried = ef && p == Pattern::kDisagree && step > kStart;
    for (size_t i = 0; i < kN; ++i) {
      const double want = exact_mean(p, o, step, i);
      DDPH_CHILD_CHECK(std::isfinite(x[i]), "%s step %d [%zu]: %s from finite input", what.c_str(),
                       step, i, text(x[i]).c_str());
      truth[i] += want;
      out_sum[i] += x[i];
      if (carried) continue;
      if (step >= kStart && huge_step(p, step) && in_huge_matrix(batched, i) &&
          (!ef || step == kStart)) {
        // Averaged uncompressed: allreduce's bits (error feedback holds
        // nothing yet on the first compressed step).
        const float ref = allreduce_of(p, o, step, i);
        DDPH_CHILD_CHECK(std::memcmp(&x[i], &ref, 4) == 0, "%s step %d [%zu]: %s, allreduce %s",
                         what.c_str(), step, i, text(x[i]).c_str(), text(ref).c_str());
      } else {
        DDPH_CHILD_CHECK(std::fabs(double(x[i]) - want) <= 1e-4 * scale + std::fabs(want) * 1e-6,
                         "%s step %d [%zu]: %s, exact mean %g", what.c_str(), step, i,
                         text(x[i]).c_str(), want);
      }
    }
  }
  if (ef) {
    // The error is the last of the bucket's three arrays in the blob, before
    // the u64 checksum (docs/powersgd.md).
    const std::string hb = ddph_test::hook_blob(ddph_test::session_state(s));
    const size_t len = batched ? kSide * kSide : kN;
    DDPH_CHILD_CHECK(hb.size() > 8 + len * 4, "%s: blob too short", what.c_str());
    std::vector<float> err(len);
    std::memcpy(err.data(), hb.data() + hb.size() - 8 - len * 4, len * 4);
    const std::vector<float> all = gather(s, err);
    for (size_t i = 0; i < kN; ++i) {
      double e = 0, big = 0;
      for (int r = 0; r < world; ++r) {
        const float v = all[size_t(r) * len + i];
        DDPH_CHILD_CHECK(std::isfinite(v), "%s: rank %d's error [%zu] is %s", what.c_str(), r, i,
                         text(v).c_str());
        e += v;
        big = std::max(big, std::fabs(double(v)));
      }
      for (int step = 0; step < kSteps; ++step)
        for (int r = 0; r < world; ++r)
          big = std::max(big, std::fabs(double(gradient(p, o, r, step, i))));
      DDPH_CHILD_CHECK(std::fabs(out_sum[i] + e / world - truth[i]) <= 2e-4 * scale + big * 0x1p-20,
                       "%s [%zu]: outputs + error %g, exact means %g", what.c_str(), i,
                       out_sum[i] + e / world, truth[i]);
    }
  }
  ddph_session_close(s);
  return 0;
}

class HugeValues : public ::testing::TestWithParam<const char*> {};

TEST_P(HugeValues, StayFiniteOnEveryRankAtEveryStep) {
  const std::string hook = GetParam();
  auto results = ddph_test::run_ranks(
      2,
      [&](int rank, int world, const std::string& dir) {
        for (int rank_opt : {1, 2, 4})
          for (bool ef : {false, true})
            for (Pattern p : {Pattern::kAgree, Pattern::kDisagree, Pattern::kSteady})
              if (run_case(hook, rank_opt, ef, p, rank, world, dir) != 0) return 1;
        return 0;
      },
      240);
  EXPECT_TRUE(ddph_test::all_passed(results)) << ddph_test::describe(results);
}

INSTANTIATE_TEST_SUITE_P(Gloo2, HugeValues, ::testing::Values("powersgd", "batched_powersgd"));

}  // namespace
