// Bad input and faults around the zero hooks: each is an error on every
// rank that names the problem, before any parameter moves, and nothing
// hangs past the communicator's timeout.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "tests/support/multiprocess.h"
#include "tests/support/optim_model.h"
#include "tests/support/session_ranks.h"

namespace {

using namespace ddph_test::optim;

const std::string kAllreduce = "{family: default, name: allreduce}";

std::string config(const std::string& options, const std::string& hook = "zero/zero_step",
                   const std::string& inner = kAllreduce) {
  return yaml("optimizer: adam, lr: 0.01, " + options, inner, hook);
}

// Opens `yaml` on 2 ranks, lets `prepare` change rank's model, runs one
// step and checks that it fails on every rank with `expected` in the message
// and that no parameter moved.
void expect_step_error(const std::string& yaml, const std::string& expected,
                       const std::function<void(Model&, int rank)>& prepare) {
  auto results = ddph_test::run_ranks(2, [&](int rank, int world, const std::string& dir) {
    ddph_session_t* s = ddph_test::open_session(yaml, rank, world, dir);
    DDPH_CHILD_CHECK(s != nullptr, "open failed");
    Model m;
    m.with_ids = true;
    prepare(m, rank);
    const std::vector<float> before = m.flat();
    std::string message;
    const ddph_code_t code = m.step(s, rank, 0, &message);
    DDPH_CHILD_CHECK(code != DDPH_OK && message.find(expected) != std::string::npos, "code %d: %s",
                     int(code), message.c_str());
    DDPH_CHILD_CHECK(m.flat() == before, "a parameter moved");
    ddph_session_close(s);
    return 0;
  });
  EXPECT_TRUE(ddph_test::all_passed(results)) << ddph_test::describe(results);
}

TEST(ZeroFaults, RanksThatDisagreeOnTheLayoutFailBeforeAnyStep) {
  for (const char* protocol : {"protocol: allreduce", "protocol: reduce_scatter"})
    expect_step_error(config(protocol), "disagree on bucket 0's parameters",
                      [](Model& m, int rank) {
                        if (rank == 1) m.regroup({{0}, {1, 2, 3}});
                      });
}

// The quantized exchange's message sizes follow bits: ranks whose configs
// differ there are refused when the session opens, on every rank.
TEST(ZeroFaults, RanksThatDisagreeOnTheGradientBitsAreRefusedAtOpen) {
  auto results = ddph_test::run_ranks(2, [&](int rank, int world, const std::string& dir) {
    const std::string yaml =
        config(std::string("protocol: reduce_scatter, bits: ") + (rank == 0 ? "8" : "4"));
    const ddph_test::OpenOutcome o = ddph_test::open_outcome(yaml, rank, world, dir);
    DDPH_CHILD_CHECK(o.code != DDPH_OK &&
                         o.message.find("disagree on the hook configuration") != std::string::npos,
                     "got %d: %s", int(o.code), o.message.c_str());
    return 0;
  });
  EXPECT_TRUE(ddph_test::all_passed(results)) << ddph_test::describe(results);
}

// Parameter 3 (bucket 1, the step's last) not lent: zero_step refuses the
// step before stepping bucket 0's share, and the refused step leaves
// nothing behind: the next step (a model that lends all) runs as usual.
TEST(ZeroFaults, AHostThatDoesNotLendTheParametersIsRefused) {
  for (const char* protocol : {"protocol: allreduce", "protocol: reduce_scatter"})
    expect_step_error(config(protocol), "params[1].data.data is NULL",
                      [](Model& m, int) { m.hide(3); });
  auto results = ddph_test::run_ranks(2, [&](int rank, int world, const std::string& dir) {
    ddph_session_t* s =
        ddph_test::open_session(config("protocol: reduce_scatter"), rank, world, dir);
    DDPH_CHILD_CHECK(s != nullptr, "open failed");
    Model hidden, lent;
    hidden.hide(3);
    const std::vector<float> before = hidden.flat();
    DDPH_CHILD_CHECK(hidden.step(s, rank, 0) != DDPH_OK, "step 0 passed");
    DDPH_CHILD_CHECK(lent.step(s, rank, 1) == DDPH_OK, "step 1 failed");
    DDPH_CHILD_CHECK(hidden.flat() == before, "the refused step's parameters moved later");
    DDPH_CHILD_CHECK(lent.flat() != before, "step 1 did not move its parameters");
    ddph_session_close(s);
    return 0;
  });
  EXPECT_TRUE(ddph_test::all_passed(results)) << ddph_test::describe(results);
}

TEST(ZeroFaults, LowPrecisionBucketsAreRefused) {
  auto results = ddph_test::run_ranks(2, [&](int rank, int world, const std::string& dir) {
    ddph_session_t* s = ddph_test::open_session(config("protocol: allreduce"), rank, world, dir);
    DDPH_CHILD_CHECK(s != nullptr, "open failed");
    Model m(GradMode::kBF16);
    std::string message;
    DDPH_CHILD_CHECK(m.step(s, rank, 0, &message) == DDPH_UNSUPPORTED &&
                         message.find("bfloat16 is not supported") != std::string::npos,
                     "%s", message.c_str());
    ddph_session_close(s);
    return 0;
  });
  EXPECT_TRUE(ddph_test::all_passed(results)) << ddph_test::describe(results);
}

// A host may regroup its parameters between steps (tests/zero/
// torch_parity_test.cpp), but not midway: a bucket that changes after the
// step's first bucket was stepped under the old layout is refused.
TEST(ZeroFaults, BucketsThatChangeMidStepAreRefused) {
  auto results = ddph_test::run_ranks(2, [&](int rank, int world, const std::string& dir) {
    ddph_session_t* s =
        ddph_test::open_session(config("protocol: reduce_scatter"), rank, world, dir);
    DDPH_CHILD_CHECK(s != nullptr, "open failed");
    Model m;
    m.with_ids = true;
    DDPH_CHILD_CHECK(m.step(s, rank, 0) == DDPH_OK, "step 0");
    m.regroup({{0, 1}, {3, 2}});  // bucket 0 as before, bucket 1 not
    std::string message;
    DDPH_CHILD_CHECK(m.step(s, rank, 1, &message) == DDPH_INVALID_ARGUMENT &&
                         message.find("bucket 1 holds other parameters than at step 0, but "
                                      "not at the step's first bucket") != std::string::npos,
                     "%s", message.c_str());
    ddph_session_close(s);
    return 0;
  });
  EXPECT_TRUE(ddph_test::all_passed(results)) << ddph_test::describe(results);
}

TEST(ZeroFaults, BadConfigsAreRefusedAtOpenNamingTheOption) {
  struct Bad {
    std::string yaml, expected;
  };
  const Bad bad[] = {
      {config("protocol: reduce_scatter, shard_buckets: true"),
       "option 'shard_buckets' applies to protocol allreduce only"},
      {config("protocol: reduce_scatter", "zero/zero_step",
              "{family: default, name: fp16_compress}"),
       "protocol reduce_scatter averages the gradients itself"},
      {config("protocol: allgather"), "protocol"},
      {config("protocol: allreduce, bits: 8"),
       "option 'bits' is 8, which quantizes the reduce-scatter; it needs protocol reduce_scatter"},
      {config("protocol: reduce_scatter, bits: 16"),
       "hook.options.bits: is 16; expected one of 32|8|4"},
      {config("beta1: 1"), "beta1"},
      {"comm: {backend: gloo}\nhook: {family: zero, name: zero_step}\n",
       "'zero_step' is a wrapper; name the hook it wraps"},
  };
  auto results = ddph_test::run_ranks(1, [&](int rank, int world, const std::string& dir) {
    for (const Bad& b : bad) {
      const ddph_test::OpenOutcome o = ddph_test::open_outcome(b.yaml, rank, world, dir);
      DDPH_CHILD_CHECK(
          o.code == DDPH_INVALID_ARGUMENT && o.message.find(b.expected) != std::string::npos,
          "expected '%s', got %d: %s", b.expected.c_str(), int(o.code), o.message.c_str());
    }
    return 0;
  });
  EXPECT_TRUE(ddph_test::all_passed(results)) << ddph_test::describe(results);
}

// A rank that dies mid-step: the survivor's step fails within the
// communicator's timeout (3 s here), naming the failure, and never hangs.
TEST(ZeroFaults, ARankThatDiesMidStepFailsTheOthersWithinTheTimeout) {
  for (const char* hook : {"zero/zero_step", "zero/zero_step_interleaved"}) {
    std::string y = config("protocol: reduce_scatter", hook);
    y.replace(y.find("timeout: 30s"), 12, "timeout: 3s");
    auto results = ddph_test::run_ranks(
        2,
        [&](int rank, int world, const std::string& dir) {
          ddph_session_t* s = ddph_test::open_session(y, rank, world, dir);
          DDPH_CHILD_CHECK(s != nullptr, "open failed");
          Model m;
          DDPH_CHILD_CHECK(m.step(s, rank, 0) == DDPH_OK, "step 0");
          if (rank == 1) _exit(0);  // gone before step 1
          const auto start = std::chrono::steady_clock::now();
          std::string message;
          const ddph_code_t code = m.step(s, rank, 1, &message);
          const double took =
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
          DDPH_CHILD_CHECK(code != DDPH_OK && !message.empty(), "step 1 passed without rank 1");
          DDPH_CHILD_CHECK(took < 20, "noticed after %.1f s", took);
          ddph_session_close(s);
          return 0;
        },
        60);
    EXPECT_TRUE(results[0].exit_code == 0 && !results[0].timed_out)
        << hook << ": " << ddph_test::describe(results);
  }
}

// A config whose communicator times out after 3 s: a rank left waiting for
// another would fail with DDPH_TIMEOUT well within the test's limits.
std::string short_timeout(std::string y) {
  y.replace(y.find("timeout: 30s"), 12, "timeout: 3s");
  return y;
}

// Rank 1 does not lend parameter 3 (bucket 1): every rank fails the step
// naming rank 1 and the parameter (not a timeout on rank 0), nothing moves,
// and the next step, with every parameter lent, runs on both. With
// zero_step_interleaved in its steady steps (bucket by bucket), a
// parameter of bucket 0 not lent at step 1 refuses bucket 0 on both ranks
// and the rest of the step with it.
TEST(ZeroFaults, AParameterLentOnOneRankOnlyFailsEveryRankNamingTheRank) {
  for (const char* hook : {"zero/zero_step", "zero/zero_step_interleaved"})
    for (const char* protocol : {"protocol: allreduce", "protocol: reduce_scatter"}) {
      const std::string y = short_timeout(config(protocol, hook));
      auto results = ddph_test::run_ranks(2, [&](int rank, int world, const std::string& dir) {
        ddph_session_t* s = ddph_test::open_session(y, rank, world, dir);
        DDPH_CHILD_CHECK(s != nullptr, "open failed");
        Model m;
        m.with_ids = true;
        if (rank == 1) m.hide(3);
        std::vector<float> before = m.flat();
        std::string message;
        ddph_code_t code = m.step(s, rank, 0, &message);
        DDPH_CHILD_CHECK(code == DDPH_INVALID_ARGUMENT &&
                             message.find("rank 1: bucket 1 of step 0: bucket.params[1].data.data "
                                          "is NULL") != std::string::npos,
                         "%s %s: code %d: %s", hook, protocol, int(code), message.c_str());
        DDPH_CHILD_CHECK(m.flat() == before, "%s %s: a parameter moved", hook, protocol);
        Model lent;
        lent.with_ids = true;
        DDPH_CHILD_CHECK(lent.step(s, rank, 1, &message) == DDPH_OK, "%s %s: step 1: %s", hook,
                         protocol, message.c_str());
        if (rank == 1) lent.hide(0);
        before = lent.flat();
        code = lent.step(s, rank, 2, &message);
        DDPH_CHILD_CHECK(code == DDPH_INVALID_ARGUMENT &&
                             message.find("rank 1: bucket 0 of step 2: bucket.params[0].data.data "
                                          "is NULL") != std::string::npos,
                         "%s %s: step 2: code %d: %s", hook, protocol, int(code), message.c_str());
        DDPH_CHILD_CHECK(lent.flat() == before, "%s %s: a parameter moved at step 2", hook,
                         protocol);
        ddph_session_close(s);
        return 0;
      });
      EXPECT_TRUE(ddph_test::all_passed(results)) << ddph_test::describe(results);
    }
}

// Two parameters under one id would share one optimizer state: refused at
// the bucket that shows it, on every rank, before anything moves; with
// different sizes the message names the id, not a checkpoint.
TEST(ZeroFaults, TwoParametersUnderOneIdAreRefusedNamingTheId) {
  for (const char* hook : {"zero/zero_step", "zero/zero_step_interleaved"}) {
    // Parameters 0 (12 elements) and 1 (5) in bucket 0.
    expect_step_error(config("protocol: allreduce", hook), "bucket 0 holds parameter id 0 twice",
                      [](Model& m, int) { m.id_of[1] = 0; });
    // Parameters 0 and 2 (12 elements each) in buckets 0 and 1.
    expect_step_error(config("protocol: reduce_scatter", hook),
                      "parameter id 0 is in bucket 0 and in bucket 1",
                      [](Model& m, int) { m.id_of[2] = 0; });
  }
}

// A bucket with gradient elements and no parameters would have nothing
// stepped while the host skips its own step: refused on every rank.
TEST(ZeroFaults, ABucketWithoutParametersIsRefused) {
  for (const char* hook : {"zero/zero_step", "zero/zero_step_interleaved"}) {
    auto results = ddph_test::run_ranks(2, [&](int rank, int world, const std::string& dir) {
      ddph_session_t* s =
          ddph_test::open_session(config("protocol: allreduce", hook), rank, world, dir);
      DDPH_CHILD_CHECK(s != nullptr, "open failed");
      std::vector<float> grads(8, 1.0f);
      int64_t n = int64_t(grads.size());
      ddph_bucket_t bucket{};
      bucket.struct_size = sizeof bucket;
      bucket.is_last = 1;
      bucket.buffer.data = grads.data();
      bucket.buffer.device = {kDLCPU, 0};
      bucket.buffer.ndim = 1;
      bucket.buffer.dtype = DLDataType{kDLFloat, 32, 1};
      bucket.buffer.shape = &n;
      struct Outcome {
        ddph_code_t code = DDPH_OK;
        std::string message;
      } outcome;
      ddph_error_t* e = ddph_session_submit(
          s, &bucket,
          [](void* user, ddph_error_t* error) {
            auto* o = static_cast<Outcome*>(user);
            o->code = ddph_error_code(error);
            o->message = ddph_error_message(error);
            ddph_error_free(error);
          },
          &outcome);
      if (e != nullptr) {
        outcome.code = ddph_error_code(e);
        outcome.message = ddph_error_message(e);
        ddph_error_free(e);
      }
      ddph_error_free(ddph_session_flush(s));
      DDPH_CHILD_CHECK(outcome.code == DDPH_INVALID_ARGUMENT &&
                           outcome.message.find("bucket 0 (8 gradient elements) carries no "
                                                "parameters") != std::string::npos,
                       "%s: code %d: %s", hook, int(outcome.code), outcome.message.c_str());
      ddph_session_close(s);
      return 0;
    });
    EXPECT_TRUE(ddph_test::all_passed(results)) << ddph_test::describe(results);
  }
}

}  // namespace
