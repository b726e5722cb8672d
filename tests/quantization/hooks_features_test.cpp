// The quantization hooks' options on real Gloo ranks: error feedback over
// 50 steps, checkpoint round trips, non-finite buckets, min_bytes, and the
// option and dtype errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "core/base/error.h"
#include "plugins/quantization/residuals.h"
#include "tests/quantization/hooks_ranks.h"
#include "tests/support/checkpoint_layout.h"
#include "tests/support/multiprocess.h"
#include "tests/support/session_ranks.h"

namespace {

using namespace ddph_test::quant;
namespace q = ddph::quantization;

constexpr size_t kN = 5000;

// Over 50 steps, sum of communicated means + mean of the ranks' residuals
// (+ the chunk owner's residual, reduce_scatter) = sum of the true means.
class ErrorFeedback : public ::testing::TestWithParam<const char*> {};

TEST_P(ErrorFeedback, ResidualsAccountForEveryQuantizationError) {
  const std::string protocol = GetParam();
  auto results = ddph_test::run_ranks(3, [&](int rank, int world, const std::string& dir) {
    ddph_session_t* s = ddph_test::open_session(
        yaml("per_channel", "protocol: " + protocol + ", bits: 4, error_feedback: true"), rank,
        world, dir);
    DDPH_CHILD_CHECK(s != nullptr, "open failed");
    std::vector<double> comm(kN, 0.0), truth(kN, 0.0);
    for (uint64_t step = 0; step < 50; ++step) {
      std::vector<float> x = inputs(rank, step, kN);
      DDPH_CHILD_CHECK(run_bucket_msg(s, x, 0, step, nullptr) == DDPH_OK, "step %d", int(step));
      for (size_t i = 0; i < kN; ++i) {
        comm[i] += x[i];
        double t = 0;
        for (int r = 0; r < world; ++r) t += input(r, step, i);
        truth[i] += t / world;
      }
    }
    const q::ResidualMap res =
        q::decode_residuals(hook_blob(session_state(s)).data(), hook_blob(session_state(s)).size());
    DDPH_CHILD_CHECK(res.count(0) == 1 && res.at(0).own.size() == kN, "no residual for bucket 0");
    const std::vector<float> all_own = gather_floats(s, res.at(0).own, world);
    // The owner residuals cover the chunks in rank order: concatenated, the bucket.
    std::vector<float> owner(res.at(0).owner);
    std::vector<int64_t> sizes;
    size_t begin = 0;
    if (protocol == "reduce_scatter") {
      // Each rank's chunk starts where the earlier ranks' chunks end.
      const std::vector<float> lens = gather_floats(s, {float(owner.size())}, world);
      for (int r = 0; r < rank; ++r) begin += size_t(lens[size_t(r)]);
    }
    double worst = 0, unfed = 0;
    for (size_t i = 0; i < kN; ++i) {
      double own = 0;
      for (int r = 0; r < world; ++r) own += all_own[size_t(r) * kN + i];
      double acc = comm[i] + own / world;
      unfed = std::max(unfed, std::fabs(comm[i] - truth[i]));
      if (protocol == "reduce_scatter") {
        if (i < begin || i >= begin + owner.size()) continue;  // another owner's chunk
        acc += owner[i - begin];
      }
      worst = std::max(worst, std::fabs(acc - truth[i]));
    }
    DDPH_CHILD_CHECK(worst < 2e-4, "%s: residual sum off by %g (without it %g)", protocol.c_str(),
                     worst, unfed);
    DDPH_CHILD_CHECK(unfed > 100 * worst, "%s: error without residuals %g is suspiciously small",
                     protocol.c_str(), unfed);
    ddph_session_close(s);
    return 0;
  });
  EXPECT_TRUE(ddph_test::all_passed(results)) << ddph_test::describe(results);
}

INSTANTIATE_TEST_SUITE_P(Gloo, ErrorFeedback, ::testing::Values("allgather", "reduce_scatter"));

// Save after 3 steps, then both the running session and a fresh one that
// loads the blob run step 3: same bytes. A blob with a broken magic is refused.
TEST(State, SaveLoadRoundTripContinuesTheRunAndRejectsCorruptBlobs) {
  auto results = ddph_test::run_ranks(2, [](int rank, int world, const std::string& dir) {
    const std::string y =
        yaml("per_tensor",
             "protocol: reduce_scatter, bits: 2, rounding: stochastic, seed: 7, error_feedback: "
             "true");
    ddph_session_t* a = ddph_test::open_session(y, rank, world, dir);
    DDPH_CHILD_CHECK(a != nullptr, "open a");
    for (uint64_t step = 0; step < 3; ++step) {
      std::vector<float> x = inputs(rank, step, kN);
      DDPH_CHILD_CHECK(run_bucket_msg(a, x, 0, step, nullptr) == DDPH_OK, "a step");
    }
    const std::string blob = session_state(a);
    DDPH_CHILD_CHECK(!hook_blob(blob).empty(), "no hook record in the session blob");
    std::vector<float> xa = inputs(rank, 3, kN), xb = xa;
    DDPH_CHILD_CHECK(run_bucket_msg(a, xa, 0, 3, nullptr) == DDPH_OK, "a step 3");
    ddph_session_close(a);

    ddph_session_t* b = ddph_test::open_session(y, rank, world, dir);
    DDPH_CHILD_CHECK(b != nullptr, "open b");
    ddph_error_t* e = ddph_session_load_state(b, blob.data(), blob.size());
    DDPH_CHILD_CHECK(e == nullptr, "load: %s", ddph_error_message(e));
    DDPH_CHILD_CHECK(run_bucket_msg(b, xb, 0, 3, nullptr) == DDPH_OK, "b step 3");
    DDPH_CHILD_CHECK(std::memcmp(xa.data(), xb.data(), kN * 4) == 0, "resumed run differs");

    // The hook's blob with a broken magic, in a valid container (whose own
    // checksum would refuse the change first otherwise).
    std::string bad_hook = hook_blob(blob);
    DDPH_CHILD_CHECK(bad_hook.compare(0, 8, "DDPHQRES") == 0, "magic not found");
    bad_hook[0] = 'X';
    const std::string bad =
        ddph_test::layout::container({{"quantization", "per_tensor", bad_hook}});
    e = ddph_session_load_state(b, bad.data(), bad.size());
    DDPH_CHILD_CHECK(ddph_error_code(e) == DDPH_INVALID_ARGUMENT, "corrupt blob: code %d",
                     int(ddph_error_code(e)));
    DDPH_CHILD_CHECK(std::strstr(ddph_error_message(e), "magic") != nullptr, "message: %s",
                     ddph_error_message(e));
    ddph_error_free(e);
    ddph_session_close(b);
    return 0;
  });
  EXPECT_TRUE(ddph_test::all_passed(results)) << ddph_test::describe(results);
}

// The hook's blob itself: wrong magic, version, truncation, trailing bytes.
TEST(State, BlobDecoderRejectsMalformedBlobs) {
  q::ResidualMap m;
  m[3].own = {1.5f, -2.0f};
  m[3].owner = {0.25f};
  m[9].own = {7.0f};
  const std::string good = q::encode_residuals(m);
  const q::ResidualMap back = q::decode_residuals(good.data(), good.size());
  EXPECT_EQ(back.size(), 2u);
  EXPECT_EQ(back.at(3).own, m[3].own);
  EXPECT_EQ(back.at(3).owner, m[3].owner);
  auto code_of = [](const std::string& b) {
    try {
      q::decode_residuals(b.data(), b.size());
      return ddph_code_t(DDPH_OK);
    } catch (const ddph::Error& e) {
      return e.code();
    }
  };
  std::string wrong_magic = good, wrong_version = good;
  wrong_magic[0] = 'X';
  wrong_version[8] = 7;
  EXPECT_EQ(code_of(wrong_magic), DDPH_INVALID_ARGUMENT);
  EXPECT_EQ(code_of(wrong_version), DDPH_INVALID_ARGUMENT);
  for (size_t cut = 0; cut < good.size(); ++cut)
    EXPECT_EQ(code_of(good.substr(0, cut)), DDPH_INVALID_ARGUMENT) << "cut at " << cut;
  EXPECT_EQ(code_of(good + "x"), DDPH_INVALID_ARGUMENT);
}

// NaN/Inf on one rank: propagate gives plain allreduce's result (NaN where
// it puts NaN); error gives DDPH_NONFINITE on every rank, naming the bucket.
TEST(NonFinite, PropagateMatchesAllreduceAndErrorFailsEveryRank) {
  auto results = ddph_test::run_ranks(3, [](int rank, int world, const std::string& dir) {
    ddph_session_t* plain = ddph_test::open_session(
        "comm: {backend: gloo, timeout: 20s}\n"
        "hook: {family: default, name: allreduce}\n",
        rank, world, dir);
    ddph_session_t* prop = ddph_test::open_session(
        yaml("per_channel", "protocol: reduce_scatter, nonfinite: propagate"), rank, world, dir);
    ddph_session_t* err =
        ddph_test::open_session(yaml("per_tensor", "nonfinite: error"), rank, world, dir);
    DDPH_CHILD_CHECK(plain && prop && err, "open failed");
    std::vector<float> x = inputs(rank, 0, kN);
    if (rank == 1) {
      x[7] = std::nanf("");
      x[600] = INFINITY;
    }
    std::vector<float> want = x, got = x, refused = x;
    DDPH_CHILD_CHECK(run_bucket_msg(plain, want, 5, 0, nullptr) == DDPH_OK, "allreduce");
    DDPH_CHILD_CHECK(run_bucket_msg(prop, got, 5, 0, nullptr) == DDPH_OK, "propagate");
    for (size_t i = 0; i < kN; ++i)
      DDPH_CHILD_CHECK(
          std::isnan(got[i]) == std::isnan(want[i]) && (std::isnan(want[i]) || got[i] == want[i]),
          "x[%zu]: %g, allreduce %g", i, got[i], want[i]);
    DDPH_CHILD_CHECK(std::isnan(got[7]) && std::isinf(got[600]), "non-finite values lost");
    std::string msg;
    DDPH_CHILD_CHECK(run_bucket_msg(err, refused, 5, 0, &msg) == DDPH_NONFINITE, "error mode");
    DDPH_CHILD_CHECK(
        msg.find("bucket 5") != std::string::npos && msg.find("rank 1") != std::string::npos,
        "message: %s", msg.c_str());
    // The session is not broken: the next finite bucket goes through.
    std::vector<float> fine = inputs(rank, 1, kN);
    DDPH_CHILD_CHECK(run_bucket_msg(err, fine, 5, 1, nullptr) == DDPH_OK, "after the error");
    ddph_session_close(err);
    ddph_session_close(prop);
    ddph_session_close(plain);
    return 0;
  });
  EXPECT_TRUE(ddph_test::all_passed(results)) << ddph_test::describe(results);
}

// Finite buckets whose float32 sum passes FLT_MAX: reduce_scatter's owner
// sums that channel in double (wire_segment.h's decode_mean), so its chunk
// comes back as 3e38 within the two quantizations' steps on every rank,
// never NaN; the other chunks are unaffected. (hooks_huge_test.cpp covers
// every option; the CUDA path decides this on the device, and the GPU tests
// hold it to these bits.)
TEST(NonFinite, AnOwnerMeanPastFloatMaxIsFiniteOnEveryRank) {
  auto results = ddph_test::run_ranks(2, [](int rank, int world, const std::string& dir) {
    ddph_session_t* s =
        ddph_test::open_session(yaml("per_channel", "protocol: reduce_scatter"), rank, world, dir);
    DDPH_CHILD_CHECK(s != nullptr, "open failed");
    const size_t n = 2048;  // 4 channels: rank 0 owns [0, 1024), rank 1 [1024, 2048)
    std::vector<float> x = inputs(rank, 0, n);
    for (size_t i = 0; i < 512; ++i) x[i] = 3e38f;  // each finite, their sum is not
    DDPH_CHILD_CHECK(run_bucket_msg(s, x, 0, 0, nullptr) == DDPH_OK, "bucket refused");
    for (size_t i = 0; i < 512; ++i)
      DDPH_CHILD_CHECK(std::fabs(double(x[i]) - 3e38) <= 2 * 3e38 / 255, "x[%zu] = %g, not 3e38", i,
                       x[i]);
    for (size_t i = 512; i < n; ++i) {
      const float mean = (input(0, 0, i) + input(1, 0, i)) / 2;
      DDPH_CHILD_CHECK(std::isfinite(x[i]) && std::fabs(x[i] - mean) < 0.1f, "x[%zu] = %g, mean %g",
                       i, x[i], mean);
    }
    DDPH_CHILD_CHECK(ddph_test::same_on_all_ranks(s, x.data(), n * sizeof(float)), "ranks differ");
    ddph_session_close(s);
    return 0;
  });
  EXPECT_TRUE(ddph_test::all_passed(results)) << ddph_test::describe(results);
}

// A non-finite bucket must leave error feedback as it was, on every rank:
// the NaN sits in the last chunk of the last rank, so every other chunk (and
// every other rank) quantizes fine before anyone learns of it. Its result is
// still allreduce's, and the next finite step still matches a run that never
// saw the bad bucket.
class NonFiniteResiduals : public ::testing::TestWithParam<const char*> {};

TEST_P(NonFiniteResiduals, StayAsTheyWereAndTheResultIsAllreduces) {
  const std::string protocol = GetParam();
  auto results = ddph_test::run_ranks(3, [&](int rank, int world, const std::string& dir) {
    const std::string opts = "protocol: " + protocol + ", error_feedback: true";
    ddph_session_t* hit = ddph_test::open_session(yaml("per_channel", opts), rank, world, dir);
    ddph_session_t* clean = ddph_test::open_session(yaml("per_channel", opts), rank, world, dir);
    ddph_session_t* plain = ddph_test::open_session(
        "comm: {backend: gloo, timeout: 20s}\nhook: {family: default, name: allreduce}\n", rank,
        world, dir);
    DDPH_CHILD_CHECK(hit && clean && plain, "open failed");
    for (ddph_session_t* s : {hit, clean}) {
      std::vector<float> x = inputs(rank, 0, kN);
      DDPH_CHILD_CHECK(run_bucket_msg(s, x, 0, 0, nullptr) == DDPH_OK, "step 0");
    }
    const std::string before = session_state(hit);
    std::vector<float> bad = inputs(rank, 1, kN), want = bad;
    if (rank == world - 1) bad[kN - 3] = want[kN - 3] = std::nanf("");
    DDPH_CHILD_CHECK(run_bucket_msg(plain, want, 0, 1, nullptr) == DDPH_OK, "allreduce");
    DDPH_CHILD_CHECK(run_bucket_msg(hit, bad, 0, 1, nullptr) == DDPH_OK, "non-finite step");
    for (size_t i = 0; i < kN; ++i)
      DDPH_CHILD_CHECK(
          std::isnan(bad[i]) == std::isnan(want[i]) && (std::isnan(want[i]) || bad[i] == want[i]),
          "x[%zu]: %g, allreduce %g", i, bad[i], want[i]);
    DDPH_CHILD_CHECK(session_state(hit) == before, "%s: the residuals changed", protocol.c_str());
    std::vector<float> a = inputs(rank, 2, kN), b = a;
    DDPH_CHILD_CHECK(run_bucket_msg(hit, a, 0, 2, nullptr) == DDPH_OK, "step 2");
    DDPH_CHILD_CHECK(run_bucket_msg(clean, b, 0, 2, nullptr) == DDPH_OK, "step 2, clean run");
    DDPH_CHILD_CHECK(std::memcmp(a.data(), b.data(), kN * sizeof(float)) == 0,
                     "the step after the non-finite one differs from a clean run's");
    ddph_session_close(plain);
    ddph_session_close(clean);
    ddph_session_close(hit);
    return 0;
  });
  EXPECT_TRUE(ddph_test::all_passed(results)) << ddph_test::describe(results);
}

// The last variant sends the bucket in 4 slices: the NaN is in the last
// one, after three slices of finite contributions were traded.
INSTANTIATE_TEST_SUITE_P(Gloo, NonFiniteResiduals,
                         ::testing::Values("allgather", "reduce_scatter",
                                           "reduce_scatter, slices: 4"));

// Buckets under min_bytes take plain allreduce (its exact result); larger
// ones are quantized.
TEST(MinBytes, SmallBucketsTakePlainAllreduce) {
  auto results = ddph_test::run_ranks(2, [](int rank, int world, const std::string& dir) {
    ddph_session_t* plain = ddph_test::open_session(
        "comm: {backend: gloo, timeout: 20s}\n"
        "hook: {family: default, name: allreduce}\n",
        rank, world, dir);
    ddph_session_t* s = ddph_test::open_session(
        yaml("per_channel", "protocol: reduce_scatter, min_bytes: 4000"), rank, world, dir);
    DDPH_CHILD_CHECK(plain && s, "open failed");
    for (size_t n : {size_t(999), size_t(1000)}) {  // 3996 bytes < 4000 <= 4000 bytes
      std::vector<float> want = inputs(rank, 0, n), got = want;
      DDPH_CHILD_CHECK(run_bucket_msg(plain, want, 0, 0, nullptr) == DDPH_OK, "allreduce");
      DDPH_CHILD_CHECK(run_bucket_msg(s, got, 0, 0, nullptr) == DDPH_OK, "quantized");
      const bool same = std::memcmp(want.data(), got.data(), n * 4) == 0;
      DDPH_CHILD_CHECK(same == (n == 999), "n=%zu: %s", n,
                       same ? "not quantized" : "differs from allreduce");
    }
    ddph_session_close(s);
    ddph_session_close(plain);
    return 0;
  });
  EXPECT_TRUE(ddph_test::all_passed(results)) << ddph_test::describe(results);
}

// Bad options fail the session open with a message naming them; a float64
// bucket is DDPH_UNSUPPORTED naming its dtype.
TEST(Options, BadValuesAndDtypesAreRefused) {
  auto results = ddph_test::run_ranks(1, [](int rank, int world, const std::string& dir) {
    const char* bad[][2] = {{"per_tensor", "bits: 3"},          {"per_tensor", "bits: 16"},
                            {"per_channel", "channel_size: 0"}, {"per_tensor", "rounding: up"},
                            {"per_tensor", "protocol: ring"},   {"per_tensor", "channel_size: 64"}};
    for (auto& b : bad) {
      const ddph_test::OpenOutcome o = ddph_test::open_outcome(yaml(b[0], b[1]), rank, world, dir);
      DDPH_CHILD_CHECK(o.code == DDPH_INVALID_ARGUMENT, "%s accepted", b[1]);
      const std::string key(b[1], std::strchr(b[1], ':'));
      DDPH_CHILD_CHECK(o.message.find(key) != std::string::npos,
                       "%s: message does not name the option: %s", b[1], o.message.c_str());
    }
    ddph_session_t* s = ddph_test::open_session(yaml("per_tensor", ""), rank, world, dir);
    DDPH_CHILD_CHECK(s != nullptr, "open failed");
    std::vector<double> d(16, 1.0);
    std::vector<float> as_float(32);
    ddph_test::FloatBucket b(as_float, 0, 0, true);
    int64_t shape = 16;
    b.bucket.buffer.data = d.data();
    b.bucket.buffer.dtype = {kDLFloat, 64, 1};
    b.bucket.buffer.shape = &shape;
    DDPH_CHILD_CHECK(ddph_test::run_bucket(s, b) == DDPH_UNSUPPORTED, "float64 accepted");
    ddph_session_close(s);
    return 0;
  });
  EXPECT_TRUE(ddph_test::all_passed(results)) << ddph_test::describe(results);
}

}  // namespace
