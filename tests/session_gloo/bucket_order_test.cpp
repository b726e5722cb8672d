// comm.bucket_check over real Gloo ranks: buckets submitted in another order
// on one rank, layouts that differ, and (strict) hook calls that differ are
// refused on every rank, naming this rank's bucket or call and another's;
// no mean of different buckets is reported as a good step.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "loader/agreement/rank_agreement.h"
#include "tests/support/multiprocess.h"
#include "tests/support/session_ranks.h"

namespace {

// These tests set the mode in the YAML; DDPH_BUCKET_CHECK would override it.
const bool kNoOverride = (unsetenv("DDPH_BUCKET_CHECK"), true);

std::string yaml(const std::string& check, const std::string& hook = "",
                 const std::string& timeout = "20s") {
  return "comm: {backend: gloo, timeout: " + timeout + ", bucket_check: " + check +
         "}\nhook: " + (hook.empty() ? "{family: default, name: allreduce}" : hook) + "\n";
}

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// One bucket's completion.
struct Done {
  ddph_code_t code = DDPH_INTERNAL;
  std::string message;
  bool called = false;
  static void on_done(void* user, ddph_error_t* e) {
    auto* d = static_cast<Done*>(user);
    d->code = ddph_error_code(e);
    d->message = ddph_error_message(e);
    d->called = true;
    ddph_error_free(e);
  }
};

// Submits the buckets in this order, the last one is_last, then flushes.
// done[i] is the completion of order[i]; returns flush's code.
ddph_code_t run_step(ddph_session_t* s, const std::vector<ddph_test::FloatBucket*>& order,
                     uint64_t step, std::vector<Done>& done) {
  done.assign(order.size(), Done{});
  for (size_t i = 0; i < order.size(); ++i) {
    order[i]->bucket.step = step;
    order[i]->bucket.is_last = i + 1 == order.size();
    if (ddph_error_t* e = ddph_session_submit(s, &order[i]->bucket, &Done::on_done, &done[i]))
      Done::on_done(&done[i], e);
  }
  ddph_error_t* e = ddph_session_flush(s);
  const ddph_code_t code = ddph_error_code(e);
  ddph_error_free(e);
  return code;
}

// Bucket i of rank r holds world * (1 + r) + 10 * world * i: divided by the
// world size and summed, the mean is exact in float32.
float value(int rank, int world, size_t i) {
  return float(world * (1 + rank) + 10 * world * int(i));
}
float mean(int world, size_t i) {
  return float(world * (world + 1) / 2 + 10 * world * int(i));
}

bool all_equal(const std::vector<float>& x, float v) {
  for (float e : x)
    if (e != v) return false;
  return true;
}

// Two equal-sized buckets (numel elements each): step 0 in order, step 1
// with the last rank submitting them the other way round, step 2 in order
// again. Returns the child's exit code.
// refused_from: the first of the swapped buckets refused (strict: 0, auto: 1).
int swapped_buckets(const std::string& check, int64_t numel, int rank, int world,
                    const std::string& dir, size_t refused_from) {
  ddph_session_t* s = ddph_test::open_session(yaml(check), rank, world, dir);
  DDPH_CHILD_CHECK(s != nullptr, "open");
  std::vector<std::vector<float>> data(2, std::vector<float>(size_t(numel)));
  std::vector<ddph_test::FloatBucket> b;
  b.reserve(2);  // a FloatBucket points into itself: never moved
  for (size_t i = 0; i < 2; ++i) b.emplace_back(data[i], i, 0, false);
  auto fill = [&] {
    for (size_t i = 0; i < 2; ++i) data[i].assign(size_t(numel), value(rank, world, i));
  };
  std::vector<Done> done;

  fill();
  DDPH_CHILD_CHECK(run_step(s, {&b[0], &b[1]}, 0, done) == DDPH_OK, "step 0: %s",
                   done[0].message.c_str());
  for (size_t i = 0; i < 2; ++i)
    DDPH_CHILD_CHECK(all_equal(data[i], mean(world, i)), "step 0, bucket %zu: %g", i,
                     double(data[i][0]));

  // The last rank swaps them.
  fill();
  const bool swaps = rank == world - 1;
  const std::vector<ddph_test::FloatBucket*> order =
      swaps ? std::vector<ddph_test::FloatBucket*>{&b[1], &b[0]}
            : std::vector<ddph_test::FloatBucket*>{&b[0], &b[1]};
  const ddph_code_t flushed = run_step(s, order, 1, done);
  DDPH_CHILD_CHECK(flushed == DDPH_INVALID_ARGUMENT, "rank %d: the step was reported as %d", rank,
                   int(flushed));
  // Strict refuses both before they run; auto lets the first (small) one
  // run and refuses the step at its last bucket. Either way the refused
  // bucket names this rank's bucket and the other rank's.
  const int other = swaps ? 0 : world - 1;
  for (size_t k = refused_from; k < 2; ++k) {
    const Done& d = done[k];
    DDPH_CHILD_CHECK(d.called && d.code == DDPH_INVALID_ARGUMENT, "rank %d: bucket %zu: code %d",
                     rank, k, int(d.code));
    DDPH_CHILD_CHECK(has(d.message, "the ranks submitted different buckets: this rank (rank " +
                                        std::to_string(rank) + ")") &&
                         has(d.message, "where rank " + std::to_string(other)),
                     "rank %d: '%s'", rank, d.message.c_str());
    DDPH_CHILD_CHECK(has(d.message, "bucket 0 of step 1 (" + std::to_string(numel) +
                                        " float32 elements on the CPU)") &&
                         has(d.message, "bucket 1 of step 1"),
                     "rank %d: both buckets are not named: '%s'", rank, d.message.c_str());
    const size_t index = order[k]->bucket.index;
    DDPH_CHILD_CHECK(all_equal(data[index], value(rank, world, index)),
                     "rank %d: refused bucket %zu was changed", rank, index);
  }
  if (refused_from == 1)
    DDPH_CHILD_CHECK(has(done[1].message,
                         "the 1 bucket this rank ran since the last check may "
                         "hold means of different buckets"),
                     "rank %d: '%s'", rank, done[1].message.c_str());

  // In order again: the session is still usable, and exact.
  fill();
  DDPH_CHILD_CHECK(run_step(s, {&b[0], &b[1]}, 2, done) == DDPH_OK, "step 2: %s",
                   done[0].message.c_str());
  for (size_t i = 0; i < 2; ++i)
    DDPH_CHILD_CHECK(all_equal(data[i], mean(world, i)), "step 2, bucket %zu: %g", i,
                     double(data[i][0]));
  ddph_session_close(s);
  return 0;
}

TEST(RankAgreement, SwappedSmallBucketsFailTheStepOnEveryRankInAuto) {
  for (int world : {2, 3}) {
    auto res = ddph_test::run_ranks(world, [](int rank, int world, const std::string& dir) {
      return swapped_buckets("auto", 256, rank, world, dir, 1);
    });
    EXPECT_TRUE(ddph_test::all_passed(res))
        << "world " << world << ": " << ddph_test::describe(res);
  }
}

TEST(RankAgreement, SwappedBucketsFailBeforeTheyRunInStrict) {
  auto res = ddph_test::run_ranks(3, [](int rank, int world, const std::string& dir) {
    return swapped_buckets("strict", 256, rank, world, dir, 0);
  });
  EXPECT_TRUE(ddph_test::all_passed(res)) << ddph_test::describe(res);
}

// Buckets of at least check_before_bytes are checked before they run:
// swapped, neither is reduced, and their buffers stay as they were.
TEST(RankAgreement, SwappedLargeBucketsFailBeforeTheyRunInAuto) {
  auto res = ddph_test::run_ranks(2, [](int rank, int world, const std::string& dir) {
    const int64_t large = int64_t(ddph::loader::AutoCheckPolicy{}.check_before_bytes / 4);
    ddph_session_t* s = ddph_test::open_session(yaml("auto"), rank, world, dir);
    DDPH_CHILD_CHECK(s != nullptr, "open");
    std::vector<std::vector<float>> data(2, std::vector<float>(size_t(large)));
    std::vector<ddph_test::FloatBucket> b;
    b.reserve(2);  // a FloatBucket points into itself: never moved
    for (size_t i = 0; i < 2; ++i) b.emplace_back(data[i], i, 0, false);
    auto fill = [&] {
      for (size_t i = 0; i < 2; ++i) data[i].assign(size_t(large), value(rank, world, i));
    };
    std::vector<Done> done;
    fill();
    DDPH_CHILD_CHECK(run_step(s, {&b[0], &b[1]}, 0, done) == DDPH_OK, "step 0");
    fill();
    const std::vector<ddph_test::FloatBucket*> order =
        rank == 1 ? std::vector<ddph_test::FloatBucket*>{&b[1], &b[0]}
                  : std::vector<ddph_test::FloatBucket*>{&b[0], &b[1]};
    DDPH_CHILD_CHECK(run_step(s, order, 1, done) == DDPH_INVALID_ARGUMENT, "step 1 accepted");
    for (size_t k = 0; k < 2; ++k) {
      DDPH_CHILD_CHECK(done[k].code == DDPH_INVALID_ARGUMENT &&
                           has(done[k].message, "bucket 0 of step 1") &&
                           has(done[k].message, "bucket 1 of step 1") &&
                           has(done[k].message, "No rank ran the bucket it checked this at"),
                       "rank %d, bucket %zu: '%s'", rank, k, done[k].message.c_str());
      DDPH_CHILD_CHECK(has(done[k].message, "as the 1st bucket since the last check") &&
                           !has(done[k].message, "this rank ran since the last check"),
                       "rank %d: the refused bucket was not the one about to run: '%s'", rank,
                       done[k].message.c_str());
    }
    for (size_t i = 0; i < 2; ++i)
      DDPH_CHILD_CHECK(all_equal(data[i], value(rank, world, i)), "rank %d: bucket %zu was reduced",
                       rank, i);
    ddph_session_close(s);
    return 0;
  });
  EXPECT_TRUE(ddph_test::all_passed(res)) << ddph_test::describe(res);
}

// Layouts that differ when a bucket first appears are refused on every rank
// before the hook runs, naming both, in every mode: here at the step's last
// bucket, which auto checks before it runs.
TEST(RankAgreement, FirstStepLayoutsThatDifferAreRefusedNamingBoth) {
  for (const char* check : {"auto", "strict", "off"}) {
    auto res = ddph_test::run_ranks(3, [&](int rank, int world, const std::string& dir) {
      ddph_session_t* s = ddph_test::open_session(yaml(check), rank, world, dir);
      DDPH_CHILD_CHECK(s != nullptr, "open");
      // Size: rank 2 has one element more.
      std::vector<float> x(rank == 2 ? 1001 : 1000, 3.0f);
      ddph_test::FloatBucket a(x, 0, 0, true);
      std::string msg;
      DDPH_CHILD_CHECK(ddph_test::run_bucket(s, a.bucket, &msg) == DDPH_INVALID_ARGUMENT,
                       "%s: sizes accepted", check);
      DDPH_CHILD_CHECK(has(msg, "1000 float32") && has(msg, "1001 float32") &&
                           has(msg, rank == 2 ? "rank 0" : "rank 2"),
                       "%s, rank %d: '%s'", check, rank, msg.c_str());
      DDPH_CHILD_CHECK(all_equal(x, 3.0f), "a refused bucket was changed");
      // Dtype: rank 1 has float64.
      std::vector<double> d(1000, 3.0);
      std::vector<float> f(1000, 3.0f);
      ddph_test::FloatBucket c(f, 1, 0, true);
      if (rank == 1) {
        c.bucket.buffer.data = d.data();
        c.bucket.buffer.dtype = {kDLFloat, 64, 1};
      }
      DDPH_CHILD_CHECK(ddph_test::run_bucket(s, c.bucket, &msg) == DDPH_INVALID_ARGUMENT,
                       "%s: dtypes accepted", check);
      DDPH_CHILD_CHECK(has(msg, "1000 float32") && has(msg, "1000 float64") &&
                           has(msg, rank == 1 ? "rank 0" : "rank 1"),
                       "%s, rank %d: '%s'", check, rank, msg.c_str());
      // Agreeing buckets still run, exactly.
      std::vector<float> y(1000, value(rank, world, 0));
      ddph_test::FloatBucket e(y, 0, 1, true);
      DDPH_CHILD_CHECK(ddph_test::run_bucket(s, e.bucket, &msg) == DDPH_OK, "%s: %s", check,
                       msg.c_str());
      DDPH_CHILD_CHECK(all_equal(y, mean(world, 0)), "mean %g", double(y[0]));
      ddph_session_close(s);
      return 0;
    });
    EXPECT_TRUE(ddph_test::all_passed(res)) << check << ": " << ddph_test::describe(res);
  }
}

// A layout that changes on one rank after the first step, at the step's
// last bucket: auto and strict refuse it by name on both ranks and go on;
// off checks it on that rank only, while the other runs the hook, so both
// wait until the timeout (the session then breaks, as on any timeout).
TEST(RankAgreement, ALayoutChangeOnOneRankIsRefusedByNameUnlessOff) {
  for (const char* check : {"auto", "strict", "off"}) {
    auto res = ddph_test::run_ranks(2, [&](int rank, int world, const std::string& dir) {
      const bool off = std::strcmp(check, "off") == 0;
      ddph_session_t* s = ddph_test::open_session(
          yaml(check, "{family: quantization, name: per_tensor}", "2s"), rank, world, dir);
      DDPH_CHILD_CHECK(s != nullptr, "open");
      std::vector<float> x(4096, 1.0f);
      ddph_test::FloatBucket a(x, 0, 0, true);
      std::string msg;
      DDPH_CHILD_CHECK(ddph_test::run_bucket(s, a.bucket, &msg) == DDPH_OK, "first step: %s",
                       msg.c_str());
      std::vector<float> y(rank == 0 ? 4000 : 4096, 1.0f);
      ddph_test::FloatBucket b(y, 0, 1, true);
      const ddph_code_t code = ddph_test::run_bucket(s, b.bucket, &msg);
      if (off) {
        DDPH_CHILD_CHECK(code == DDPH_TIMEOUT || code == DDPH_COMM_FAILURE, "rank %d: code %d",
                         rank, int(code));
      } else {
        DDPH_CHILD_CHECK(
            code == DDPH_INVALID_ARGUMENT && has(msg, "4000 float32") && has(msg, "4096 float32"),
            "%s, rank %d: code %d: '%s'", check, rank, int(code), msg.c_str());
        std::vector<float> z(4096, 2.0f);
        ddph_test::FloatBucket c(z, 0, 2, true);
        DDPH_CHILD_CHECK(ddph_test::run_bucket(s, c.bucket, &msg) == DDPH_OK, "after: %s",
                         msg.c_str());
      }
      ddph_session_close(s);
      return 0;
    });
    EXPECT_TRUE(ddph_test::all_passed(res)) << check << ": " << ddph_test::describe(res);
  }
}

// A layout that changes on one rank in a bucket that is NOT the step's last
// (docs/reliability.md says when the session survives it). auto compares at
// the step's last bucket, so the other rank has already run that bucket's
// hook: its collective meets a different call, both ranks fail naming both
// calls, and the communicator closes: the session is broken, and the next
// step, right on both ranks, fails at once with that cause. strict compares
// each bucket before its hook runs: refused on both, the next step works.
TEST(RankAgreement, ALayoutChangeBeforeTheStepsLastBucketBreaksTheSessionUnlessStrict) {
  for (const char* check : {"auto", "strict"}) {
    auto res = ddph_test::run_ranks(2, [&](int rank, int world, const std::string& dir) {
      const bool strict = std::strcmp(check, "strict") == 0;
      ddph_session_t* s = ddph_test::open_session(yaml(check, "", "2s"), rank, world, dir);
      DDPH_CHILD_CHECK(s != nullptr, "open");
      std::vector<float> a0(1024, 1.0f), b0(1024, 1.0f);
      ddph_test::FloatBucket a(a0, 0, 0, false), b(b0, 1, 0, true);
      std::vector<Done> done;
      DDPH_CHILD_CHECK(run_step(s, {&a, &b}, 0, done) == DDPH_OK, "step 0");
      // Step 1: rank 0's bucket 0 has 1000 elements instead of 1024.
      std::vector<float> c0(rank == 0 ? 1000 : 1024, 1.0f);
      ddph_test::FloatBucket c(c0, 0, 1, false);
      const ddph_code_t code = run_step(s, {&c, &b}, 1, done);
      DDPH_CHILD_CHECK(code != DDPH_OK && done[0].code != DDPH_OK, "%s, rank %d: step 1 passed",
                       check, rank);
      // strict names the buckets' elements, the communicator the calls' bytes.
      const std::string& m = done[0].message;
      DDPH_CHILD_CHECK((has(m, "1000 float32") && has(m, "1024 float32")) ||
                           (has(m, "4000 bytes") && has(m, "4096 bytes")),
                       "%s, rank %d: both calls are not named: %s", check, rank,
                       done[0].message.c_str());
      // Step 2, the same buckets on both ranks.
      std::vector<float> d0(1024, 2.0f);
      ddph_test::FloatBucket d(d0, 0, 2, false);
      const ddph_code_t next = run_step(s, {&d, &b}, 2, done);
      if (strict) {
        DDPH_CHILD_CHECK(next == DDPH_OK && all_equal(d0, 2.0f), "strict, rank %d: step 2: %s",
                         rank, done[0].message.c_str());
      } else {
        DDPH_CHILD_CHECK(next != DDPH_OK && has(done[0].message, "broken"),
                         "auto, rank %d: step 2 gave %d: %s", rank, int(next),
                         done[0].message.c_str());
      }
      ddph_session_close(s);
      return 0;
    });
    EXPECT_TRUE(ddph_test::all_passed(res)) << check << ": " << ddph_test::describe(res);
  }
}

// A bucket of 1024 float32 elements whose parameters are one 32 x 32
// matrix on rank 0 and one vector on rank 1: the buckets agree, but
// PowerSGD compresses the matrix (an allreduce of P, 32 elements) and
// sends the vector whole (1024 elements). strict stops the first call that
// differs, naming both.
TEST(RankAgreement, StrictNamesAHookCallThatDiffersPerRank) {
  auto res = ddph_test::run_ranks(2, [](int rank, int world, const std::string& dir) {
    ddph_session_t* s =
        ddph_test::open_session(yaml("strict",
                                     "{family: powersgd, name: powersgd, options: {start_iter: 0, "
                                     "rank: 1, error_feedback: false, warm_start: false}}"),
                                rank, world, dir);
    DDPH_CHILD_CHECK(s != nullptr, "open");
    std::vector<float> x(1024, 1.0f);
    ddph_test::FloatBucket b(x, 0, 0, true);
    int64_t matrix[2] = {32, 32}, vector[1] = {1024};
    ddph_param_t p{};
    p.struct_size = sizeof p;
    p.offset = 0;
    p.ndim = rank == 0 ? 2 : 1;
    p.shape = rank == 0 ? matrix : vector;
    b.bucket.num_params = 1;
    b.bucket.params = &p;
    std::string msg;
    const ddph_code_t code = ddph_test::run_bucket(s, b.bucket, &msg);
    DDPH_CHILD_CHECK(code == DDPH_INVALID_ARGUMENT, "rank %d: code %d: %s", rank, int(code),
                     msg.c_str());
    const std::string mine = rank == 0 ? "of 32 float32" : "of 1024 float32";
    const std::string theirs = rank == 0 ? "of 1024 float32" : "of 32 float32";
    DDPH_CHILD_CHECK(has(msg, "the ranks are not making the same call: this rank (rank " +
                                  std::to_string(rank) + ") calls allreduce") &&
                         has(msg, "where rank " + std::to_string(1 - rank) + " calls allreduce"),
                     "rank %d: '%s'", rank, msg.c_str());
    const size_t at_mine = msg.find(mine), at_theirs = msg.find(theirs, msg.find("where rank"));
    DDPH_CHILD_CHECK(at_mine < msg.find("where rank") && at_theirs != std::string::npos,
                     "rank %d: the calls are not named: '%s'", rank, msg.c_str());
    DDPH_CHILD_CHECK(has(msg, "in the hook of bucket 0 of step 0"), "rank %d: '%s'", rank,
                     msg.c_str());
    ddph_session_close(s);
    return 0;
  });
  EXPECT_TRUE(ddph_test::all_passed(res)) << ddph_test::describe(res);
}

// Communicators a hook splits are checked too: hierarchical (2 machines of
// 2 ranks) runs PowerSGD among the leaders on a communicator it split, and
// the leaders' parameter shapes differ (rank 0: a 32 x 32 matrix, rank 2:
// a vector), so their first calls there differ. The leaders' error names
// both calls; every rank fails the bucket, and none hangs. Agreeing
// buckets through the same wrapped communicators give the exact mean.
TEST(RankAgreement, StrictChecksTheCommunicatorsAHookSplits) {
  auto res = ddph_test::run_ranks(4, [](int rank, int world, const std::string& dir) {
    const std::string inner =
        "{family: powersgd, name: powersgd, options: {start_iter: 0, rank: 1, error_feedback: "
        "false, warm_start: false}}";
    ddph_session_t* s = ddph_test::open_session(
        yaml("strict",
             "{family: hierarchical, name: hierarchical, options: {local_size: 2}, wrap: " + inner +
                 "}",
             "5s"),
        rank, world, dir);
    DDPH_CHILD_CHECK(s != nullptr, "open");
    // Agreeing: a vector everywhere, sent whole; the mean is exact.
    std::vector<float> x(1024, value(rank, world, 0));
    ddph_test::FloatBucket a(x, 0, 0, true);
    std::string msg;
    DDPH_CHILD_CHECK(ddph_test::run_bucket(s, a.bucket, &msg) == DDPH_OK, "rank %d: %s", rank,
                     msg.c_str());
    DDPH_CHILD_CHECK(all_equal(x, mean(world, 0)), "rank %d: mean %g", rank, double(x[0]));
    // The leaders' shapes differ.
    std::vector<float> y(1024, 1.0f);
    ddph_test::FloatBucket b(y, 0, 1, true);
    int64_t matrix[2] = {32, 32}, vector[1] = {1024};
    ddph_param_t p{};
    p.struct_size = sizeof p;
    p.ndim = rank == 0 ? 2 : 1;
    p.shape = rank == 0 ? matrix : vector;
    b.bucket.num_params = 1;
    b.bucket.params = &p;
    const ddph_code_t code = ddph_test::run_bucket(s, b.bucket, &msg);
    DDPH_CHILD_CHECK(code != DDPH_OK, "rank %d: accepted", rank);
    if (rank == 0 || rank == 2)
      DDPH_CHILD_CHECK(code == DDPH_INVALID_ARGUMENT &&
                           has(msg, "the ranks are not making the same call") &&
                           has(msg, "of 32 float32") && has(msg, "of 1024 float32"),
                       "leader %d: %d '%s'", rank, int(code), msg.c_str());
    ddph_session_close(s);
    return 0;
  });
  EXPECT_TRUE(ddph_test::all_passed(res)) << ddph_test::describe(res);
}

// Ranks that would check differently would wait for each other's
// exchanges: the mode is part of the configuration the ranks agree on.
TEST(RankAgreement, RanksWithDifferentBucketChecksFailAtOpen) {
  auto res = ddph_test::run_ranks(2, [](int rank, int world, const std::string& dir) {
    const ddph_test::OpenOutcome o =
        ddph_test::open_outcome(yaml(rank == 0 ? "auto" : "strict"), rank, world, dir);
    DDPH_CHILD_CHECK(o.code == DDPH_INVALID_ARGUMENT &&
                         has(o.message, "the ranks disagree on the hook configuration") &&
                         has(o.message, rank == 0 ? "bucket_check=auto" : "bucket_check=strict"),
                     "rank %d: %d '%s'", rank, int(o.code), o.message.c_str());
    return 0;
  });
  EXPECT_TRUE(ddph_test::all_passed(res)) << ddph_test::describe(res);
}

// DDPH_BUCKET_CHECK overrides the YAML (as TORCH_DISTRIBUTED_DEBUG does for
// PyTorch): strict refuses the first swapped bucket before it runs, where
// auto would have let it run. A value it does not know fails the open.
TEST(RankAgreement, TheEnvironmentOverridesTheYamlsBucketCheck) {
  auto res = ddph_test::run_ranks(2, [](int rank, int world, const std::string& dir) {
    setenv("DDPH_BUCKET_CHECK", "sometimes", 1);
    const ddph_test::OpenOutcome bad = ddph_test::open_outcome(yaml("auto"), rank, world, dir);
    DDPH_CHILD_CHECK(
        bad.code == DDPH_INVALID_ARGUMENT &&
            has(bad.message, "DDPH_BUCKET_CHECK='sometimes' is not auto, strict or off"),
        "rank %d: %d '%s'", rank, int(bad.code), bad.message.c_str());
    setenv("DDPH_BUCKET_CHECK", "strict", 1);
    const std::string fresh = dir + "/strict";  // a store of its own for the second job
    std::filesystem::create_directories(fresh);
    return swapped_buckets("auto", 256, rank, world, fresh, /*refused_from=*/0);
  });
  EXPECT_TRUE(ddph_test::all_passed(res)) << ddph_test::describe(res);
}

// A value of DDPH_BUCKET_CHECK that one rank alone has: every rank refuses
// the job at open, naming that rank and its value, and none waits for it.
TEST(RankAgreement, ABadBucketCheckOnOneRankIsRefusedOnEveryRank) {
  auto res = ddph_test::run_ranks(2, [](int rank, int world, const std::string& dir) {
    if (rank == 0) setenv("DDPH_BUCKET_CHECK", "sometimes", 1);
    const ddph_test::OpenOutcome bad =
        ddph_test::open_outcome(yaml("auto", "", "30s"), rank, world, dir);
    DDPH_CHILD_CHECK(bad.code == DDPH_INVALID_ARGUMENT &&
                         has(bad.message,
                             "rank 0: environment variable DDPH_BUCKET_CHECK='sometimes' is not "
                             "auto, strict or off") &&
                         has(bad.message, "(this rank is " + std::to_string(rank) + ")"),
                     "rank %d: %d '%s'", rank, int(bad.code), bad.message.c_str());
    return 0;
  });
  EXPECT_TRUE(ddph_test::all_passed(res)) << ddph_test::describe(res);
}

// On a host's communicator (which may abort or hang when ranks send
// different lengths) auto checks a new layout before its bucket runs, even
// in the middle of a step.
TEST(RankAgreement, OnAHostCommunicatorNewLayoutsAreCheckedBeforeTheyRun) {
  auto res = ddph_test::run_ranks(2, [](int rank, int world, const std::string& dir) {
    ddph_session_t* lender = ddph_test::open_session(yaml("auto"), rank, world, dir);
    DDPH_CHILD_CHECK(lender != nullptr, "open");
    const std::string text =
        yaml("auto").replace(0, std::strlen("comm: {backend: gloo"), "comm: {backend: host");
    std::string error;
    ddph_session_t* s =
        ddph_test::open_on_host_comm(text, rank, world, ddph_session_comm(lender), &error);
    DDPH_CHILD_CHECK(s != nullptr, "open on the host's comm: %s", error.c_str());
    std::vector<float> x(rank == 1 ? 999 : 1000, 1.0f), y(1000, 1.0f);
    ddph_test::FloatBucket a(x, 0, 0, false), b(y, 1, 0, true);
    std::vector<Done> done;
    DDPH_CHILD_CHECK(run_step(s, {&a, &b}, 0, done) == DDPH_INVALID_ARGUMENT, "accepted");
    DDPH_CHILD_CHECK(done[0].code == DDPH_INVALID_ARGUMENT && has(done[0].message, "999 float32") &&
                         has(done[0].message, "1000 float32"),
                     "rank %d: the first bucket: %d '%s'", rank, int(done[0].code),
                     done[0].message.c_str());
    DDPH_CHILD_CHECK(done[1].code == DDPH_OK, "rank %d: the second bucket: '%s'", rank,
                     done[1].message.c_str());
    ddph_session_close(s);
    ddph_session_close(lender);
    return 0;
  });
  EXPECT_TRUE(ddph_test::all_passed(res)) << ddph_test::describe(res);
}

}  // namespace
