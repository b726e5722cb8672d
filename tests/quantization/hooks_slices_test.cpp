// protocol reduce_scatter in slices (option `slices`): a bucket cut into
// any number of slices ends with the same bits, and the same residuals, as
// one sent whole, over several steps of stochastic rounding with error
// feedback; so does the size-picked default on a bucket big enough to be
// cut. (A non-finite bucket in slices: hooks_features_test.cpp.)
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "tests/quantization/hooks_ranks.h"
#include "tests/support/multiprocess.h"
#include "tests/support/session_ranks.h"

namespace {

using namespace ddph_test::quant;

// Runs `steps` steps of one bucket of n elements with `slices` ("" for the
// default) on 4-bit stochastic rounding with error feedback: the last
// step's result, the hook's checkpoint blob after it, and the payload
// bytes it handed to collectives.
struct SliceRun {
  std::vector<float> result;
  std::string state;
  uint64_t bytes_out = 0;
};

SliceRun run(int rank, int world, const std::string& dir, size_t n, const std::string& slices,
             int steps) {
  std::string opts =
      "protocol: reduce_scatter, bits: 4, rounding: stochastic, seed: 3, error_feedback: true";
  if (!slices.empty()) opts += ", slices: " + slices;
  ddph_session_t* s = ddph_test::open_session(yaml("per_channel", opts), rank, world, dir);
  SliceRun r;
  if (s == nullptr) return r;
  for (int step = 0; step < steps; ++step) {
    r.result = inputs(rank, uint64_t(step), n);
    std::string msg;
    if (run_bucket_msg(s, r.result, 0, uint64_t(step), &msg) != DDPH_OK) {
      std::fprintf(stderr, "slices %s, step %d: %s\n", slices.c_str(), step, msg.c_str());
      r.result.clear();
      break;
    }
  }
  r.state = session_state(s);
  ddph_stats_t st{};
  st.struct_size = sizeof st;
  ddph_error_t* e = ddph_session_stats(s, &st);
  ddph_error_free(e);
  r.bytes_out = st.bytes_out;
  ddph_session_close(s);
  return r;
}

TEST(Slices, AnyNumberOfSlicesGivesTheBitsOfOneWholeBucket) {
  // 3 ranks, 41 channels of 512 and a short one: chunks of 14, 14 and 14
  // channels (the last short). 16 slices leave pieces empty.
  constexpr size_t kN = 41 * 512 + 100;
  auto results = ddph_test::run_ranks(3, [&](int rank, int world, const std::string& dir) {
    const SliceRun whole = run(rank, world, dir, kN, "1", 4);
    DDPH_CHILD_CHECK(whole.result.size() == kN, "slices 1 failed");
    for (const char* slices : {"2", "5", "16"}) {
      const SliceRun cut = run(rank, world, dir, kN, slices, 4);
      DDPH_CHILD_CHECK(cut.result.size() == kN, "slices %s failed", slices);
      for (size_t i = 0; i < kN; ++i)
        DDPH_CHILD_CHECK(std::memcmp(&cut.result[i], &whole.result[i], 4) == 0,
                         "slices %s: x[%zu] = %.9g, whole bucket %.9g", slices, i, cut.result[i],
                         whole.result[i]);
      DDPH_CHILD_CHECK(cut.state == whole.state, "slices %s: the residuals differ", slices);
    }
    return 0;
  });
  EXPECT_TRUE(ddph_test::all_passed(results)) << ddph_test::describe(results);
}

TEST(Slices, TheDefaultCutsABigBucketAndKeepsItsBits) {
  // 17 MiB of floats: the default cuts it in two (one slice per 8 MiB).
  constexpr size_t kN = (17u << 20) / 4;
  auto results = ddph_test::run_ranks(2, [&](int rank, int world, const std::string& dir) {
    const SliceRun whole = run(rank, world, dir, kN, "1", 2);
    const SliceRun dflt = run(rank, world, dir, kN, "", 2);
    DDPH_CHILD_CHECK(whole.result.size() == kN && dflt.result.size() == kN, "a run failed");
    DDPH_CHILD_CHECK(std::memcmp(whole.result.data(), dflt.result.data(), kN * 4) == 0,
                     "the default's result differs from the whole bucket's");
    DDPH_CHILD_CHECK(whole.state == dflt.state, "the default's residuals differ");
    // Each slice carries its own rank headers: a cut bucket sends a few
    // more bytes than a whole one.
    DDPH_CHILD_CHECK(dflt.bytes_out > whole.bytes_out,
                     "the default sent %llu bytes, the whole bucket %llu: it was not cut",
                     (unsigned long long)dflt.bytes_out, (unsigned long long)whole.bytes_out);
    return 0;
  });
  EXPECT_TRUE(ddph_test::all_passed(results)) << ddph_test::describe(results);
}

}  // namespace
