// Finite buckets holding huge values (+-3e38, FLT_MAX, and both among
// ordinary values) through both hooks, both protocols, 8/4/2 bits, both
// roundings, with and without error feedback and with nonfinite: error, on
// 2 real ranks over Gloo (docs/quantization.md, "Huge values"). Every step
// completes, every value is finite and the same on both ranks, and the
// result is within the documented bound of the exact mean computed here in
// double: one quantization step per rank (and one more for the owner's
// re-quantization). With error feedback the residuals account for the rest:
// the communicated means plus the residuals equal the exact means.
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "core/base/error.h"
#include "plugins/quantization/residuals.h"
#include "tests/quantization/hooks_ranks.h"
#include "tests/support/multiprocess.h"
#include "tests/support/session_ranks.h"

namespace {

using namespace ddph_test::quant;
namespace q = ddph::quantization;

constexpr size_t kN = 8 * kChannel + 100;
constexpr uint64_t kSteps = 3;

// Channel by channel: a sum past FLT_MAX, ranges past FLT_MAX, FLT_MAX
// itself, huge values among ordinary ones, ordinary and small values, and a
// short last channel.
float huge_input(int rank, uint64_t step, size_t i) {
  const float base = input(rank, step, i);
  switch (i / kChannel) {
    case 0:
      return 3e38f;  // the ranks' sum passes FLT_MAX
    case 1:
      return (i + size_t(rank)) % 2 ? 3e38f : -3e38f;  // so does each rank's range
    case 2:
      return rank == 0 ? FLT_MAX : -FLT_MAX;
    case 3:
      return i % 3 ? FLT_MAX : base;
    case 4:
      return i % kChannel == 7 ? (rank ? -3e38f : 3e38f) : (i % kChannel == 9 ? -FLT_MAX : base);
    case 5:
      return base;
    case 6:
      return (i + step) % 2 ? FLT_MAX : -FLT_MAX;
    case 7:
      return base * 1e-3f;
    default:
      return i % 5 == 0 ? -3e38f : base;
  }
}

std::vector<float> huge_inputs(int rank, uint64_t step) {
  std::vector<float> v(kN);
  for (size_t i = 0; i < kN; ++i) v[i] = huge_input(rank, step, i);
  return v;
}

double exact_mean(int world, uint64_t step, size_t i) {
  double sum = 0;
  for (int r = 0; r < world; ++r) sum += huge_input(r, step, i);
  return sum / world;
}

// One step of a quantization of values in [lo, hi] (lo <= 0 <= hi): the
// documented scale is at most (hi - lo) / qmax, or FLT_EPSILON, and every
// code lies within one step of its value (nearest rounding within half of
// one, except where a range past FLT_MAX clamps the grid's far end).
double step_of(double lo, double hi, double qmax) {
  return std::max((hi - lo) / qmax, double(FLT_EPSILON)) * (1 + 0x1p-20);
}

// |result - exact mean| at step `step`, without error feedback.
std::vector<double> bound(bool per_channel, bool reduce_scatter, int bits, int world,
                          uint64_t step) {
  const size_t ch = per_channel ? kChannel : kN;
  const double qmax = double((1 << bits) - 1);
  std::vector<double> out(kN);
  for (size_t b = 0; b < kN; b += ch) {
    const size_t e = std::min(kN, b + ch);
    double first = 0, mean_lo = 0, mean_hi = 0, top = 0;
    for (int r = 0; r < world; ++r) {
      double lo = 0, hi = 0;
      for (size_t i = b; i < e; ++i) {
        lo = std::min(lo, double(huge_input(r, step, i)));
        hi = std::max(hi, double(huge_input(r, step, i)));
      }
      first += step_of(lo, hi, qmax) / world;
      top = std::max(top, std::max(hi, -lo));
    }
    for (size_t i = b; i < e; ++i) {
      mean_lo = std::min(mean_lo, exact_mean(world, step, i));
      mean_hi = std::max(mean_hi, exact_mean(world, step, i));
    }
    // The owner re-quantizes means that lie within the first errors of the
    // exact ones (a per_tensor chunk's range within the whole bucket's).
    const double second = reduce_scatter ? step_of(mean_lo - first, mean_hi + first, qmax) : 0.0;
    for (size_t i = b; i < e; ++i) out[i] = first + second + top * 0x1p-20;
  }
  return out;
}

struct Case {
  bool ef;
  bool stochastic;
  int bits;
};

std::vector<Case> cases() {
  std::vector<Case> all;
  for (bool ef : {false, true})
    for (bool stochastic : {false, true})
      for (int bits : {8, 4, 2}) all.push_back({ef, stochastic, bits});
  return all;
}

// Over the steps, sum of the communicated means + the mean of the ranks'
// residuals (+ the owner's residual of its chunk) = sum of the exact means,
// within float rounding of the magnitudes involved. A residual may
// saturate at +-FLT_MAX (documented): a grid over a range past FLT_MAX may
// not reach values near FLT_MAX (at 2 bits its top is FLT_MAX / 2), so
// their residual grows each step until what lies beyond FLT_MAX is lost.
// Only elements whose inputs are that large may do so.
int check_residuals(ddph_session_t* s, const std::vector<double>& comm, int rank, int world,
                    bool reduce_scatter, const std::string& what) {
  const std::string blob = hook_blob(session_state(s));
  const q::ResidualMap res = q::decode_residuals(blob.data(), blob.size());
  DDPH_CHILD_CHECK(res.count(0) == 1 && res.at(0).own.size() == kN, "%s: no residual",
                   what.c_str());
  const std::vector<float> all_own = gather_floats(s, res.at(0).own, world);
  const std::vector<float>& owner = res.at(0).owner;
  size_t begin = 0;
  if (reduce_scatter) {
    const std::vector<float> lens = gather_floats(s, {float(owner.size())}, world);
    for (int r = 0; r < rank; ++r) begin += size_t(lens[size_t(r)]);
  }
  for (size_t i = 0; i < kN; ++i) {
    double truth = 0, own = 0, scale = 0;
    bool at_limit = false;
    for (uint64_t step = 0; step < kSteps; ++step) {
      truth += exact_mean(world, step, i);
      for (int r = 0; r < world; ++r)
        scale = std::max(scale, std::fabs(double(huge_input(r, step, i))));
    }
    for (int r = 0; r < world; ++r) {
      own += all_own[size_t(r) * kN + i];
      at_limit |= std::fabs(all_own[size_t(r) * kN + i]) == FLT_MAX;
    }
    double acc = comm[i] + own / world;
    if (reduce_scatter) {
      if (i < begin || i >= begin + owner.size()) continue;  // another owner's chunk
      acc += owner[i - begin];
      at_limit |= std::fabs(owner[i - begin]) == FLT_MAX;
    }
    if (at_limit && scale >= FLT_MAX / 4) continue;
    DDPH_CHILD_CHECK(std::fabs(acc - truth) <= (scale + std::fabs(own)) * 0x1p-18 + 1e-5,
                     "%s [%zu]: means + residuals %g, exact %g", what.c_str(), i, acc, truth);
  }
  return 0;
}

int run_case(const std::string& hook, const std::string& protocol, const Case& c, bool error_mode,
             int rank, int world, const std::string& dir) {
  const bool per_channel = hook == "per_channel", rs = protocol == "reduce_scatter";
  const std::string options = "protocol: " + protocol + ", bits: " + std::to_string(c.bits) +
                              ", rounding: " + (c.stochastic ? "stochastic" : "nearest") +
                              ", error_feedback: " + (c.ef ? "true" : "false") +
                              ", nonfinite: " + (error_mode ? "error" : "propagate");
  const std::string what = hook + " {" + options + "}";
  ddph_session_t* s = ddph_test::open_session(yaml(hook, options), rank, world, dir);
  DDPH_CHILD_CHECK(s != nullptr, "open %s", what.c_str());
  std::vector<double> comm(kN, 0.0);
  for (uint64_t step = 0; step < kSteps; ++step) {
    std::vector<float> x = huge_inputs(rank, step);
    std::string msg;
    DDPH_CHILD_CHECK(run_bucket_msg(s, x, 0, step, &msg) == DDPH_OK, "%s step %d: %s", what.c_str(),
                     int(step), msg.c_str());
    for (size_t i = 0; i < kN; ++i)
      DDPH_CHILD_CHECK(std::isfinite(x[i]), "%s step %d [%zu]: %g from finite input", what.c_str(),
                       int(step), i, x[i]);
    DDPH_CHILD_CHECK(ddph_test::same_on_all_ranks(s, x.data(), kN * sizeof(float)),
                     "%s step %d: ranks differ", what.c_str(), int(step));
    // Error feedback's first step quantizes the bucket alone; later ones add
    // residuals, which check_residuals accounts for.
    if (!c.ef || step == 0) {
      const std::vector<double> bd = bound(per_channel, rs, c.bits, world, step);
      for (size_t i = 0; i < kN; ++i) {
        const double want = exact_mean(world, step, i);
        DDPH_CHILD_CHECK(std::fabs(double(x[i]) - want) <= bd[i],
                         "%s step %d [%zu]: %g, exact mean %g, bound %g", what.c_str(), int(step),
                         i, x[i], want, bd[i]);
      }
    }
    for (size_t i = 0; i < kN; ++i) comm[i] += x[i];
  }
  if (c.ef && check_residuals(s, comm, rank, world, rs, what) != 0) return 1;
  ddph_session_close(s);
  return 0;
}

class HugeValues : public ::testing::TestWithParam<std::tuple<const char*, const char*>> {};

TEST_P(HugeValues, AreFiniteOnEveryRankAndWithinTheBoundOfTheExactMean) {
  const std::string hook = std::get<0>(GetParam()), protocol = std::get<1>(GetParam());
  auto results = ddph_test::run_ranks(
      2,
      [&](int rank, int world, const std::string& dir) {
        for (const Case& c : cases())
          for (bool error_mode : {false, true})
            if (run_case(hook, protocol, c, error_mode, rank, world, dir) != 0) return 1;
        return 0;
      },
      240);
  EXPECT_TRUE(ddph_test::all_passed(results)) << ddph_test::describe(results);
}

INSTANTIATE_TEST_SUITE_P(
    Gloo2, HugeValues,
    ::testing::Combine(::testing::Values("per_tensor", "per_channel"),
                       ::testing::Values("allgather", "reduce_scatter")),
    [](const ::testing::TestParamInfo<std::tuple<const char*, const char*>>& i) {
      return std::string(std::get<0>(i.param)) + "_" + std::get<1>(i.param);
    });

}  // namespace
