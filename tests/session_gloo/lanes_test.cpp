// Buckets in flight together (ABI 1.8): a chain of DDPH_HOOK_STATELESS hooks
// runs its buckets on two lanes, each a Gloo communicator of its own, over
// real ranks. The results are those of one lane bit for bit, the dones come
// in submission order, and the figures are summed over the lanes.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "tests/support/multiprocess.h"
#include "tests/support/session_ranks.h"

namespace {

// These tests choose the lanes; the environment must not.
const bool kNoOverride = (unsetenv("DDPH_LANES"), unsetenv("DDPH_BUCKET_CHECK"), true);

std::string yaml(const std::string& hook) {
  return "comm: {backend: gloo, timeout: 30s}\nhook: " + hook + "\n";
}

// What one step of the buckets gave on one session.
struct StepResult {
  std::vector<std::vector<float>> data;
  std::vector<int> done_order;
  ddph_stats_t stats{};
  std::vector<ddph_bucket_metrics_t> metrics;
};

struct DoneLog {
  std::vector<int>* order;
  int index;
  ddph_code_t* code;
  static void on_done(void* user, ddph_error_t* e) {
    auto* d = static_cast<DoneLog*>(user);
    if (e != nullptr && *d->code == DDPH_OK) *d->code = ddph_error_code(e);
    d->order->push_back(d->index);  // the session calls dones one at a time
    ddph_error_free(e);
  }
};

// Values whose mean the hooks round differently from a plain sum, so that a
// bucket paired with another one, or reduced twice, would show.
float value(int rank, size_t bucket, size_t i) {
  return float(rank + 1) * 0.37f + float(bucket) * 1.1f + float(i % 97) * 0.013f;
}

// Runs `sizes.size()` buckets of one step on the open session s and fills
// *out; returns the child's code (0: pass).
int run_open_step(ddph_session_t* s, const std::vector<size_t>& sizes, int rank, StepResult* out) {
  out->data.assign(sizes.size(), {});
  std::vector<ddph_test::FloatBucket> b;
  b.reserve(sizes.size());  // a FloatBucket points into itself: never moved
  for (size_t k = 0; k < sizes.size(); ++k) {
    out->data[k].resize(sizes[k]);
    for (size_t i = 0; i < sizes[k]; ++i) out->data[k][i] = value(rank, k, i);
    b.emplace_back(out->data[k], k, 0, k + 1 == sizes.size());
  }
  ddph_code_t code = DDPH_OK;
  std::vector<DoneLog> logs(sizes.size());
  for (size_t k = 0; k < sizes.size(); ++k) {
    logs[k] = DoneLog{&out->done_order, int(k), &code};
    DDPH_CHILD_CHECK(ddph_session_submit(s, &b[k].bucket, &DoneLog::on_done, &logs[k]) == nullptr,
                     "submit %zu", k);
  }
  ddph_error_t* e = ddph_session_flush(s);
  DDPH_CHILD_CHECK(e == nullptr && code == DDPH_OK, "flush: %s", ddph_error_message(e));
  out->stats.struct_size = sizeof out->stats;
  DDPH_CHILD_CHECK(ddph_session_stats(s, &out->stats) == nullptr, "stats");
  ddph_bucket_metrics_t m{};
  m.struct_size = sizeof m;
  int32_t taken = 0;
  while (ddph_session_take_metrics(s, &m, &taken) == nullptr && taken) out->metrics.push_back(m);
  return 0;
}

// Opens a session offering `lanes` lanes (DDPH_LANES) and runs one step on it.
int run_step(const std::string& hook, int lanes, const std::vector<size_t>& sizes, int rank,
             int world, const std::string& dir, StepResult* out) {
  setenv("DDPH_LANES", std::to_string(lanes).c_str(), 1);
  ddph_session_t* s = ddph_test::open_session(yaml(hook), rank, world, dir);
  unsetenv("DDPH_LANES");
  DDPH_CHILD_CHECK(s != nullptr, "open with %d lanes", lanes);
  const int rc = run_open_step(s, sizes, rank, out);
  ddph_session_close(s);
  return rc;
}

// 0 when each bucket started after the one before it ended (one lane).
int one_at_a_time(const StepResult& run) {
  for (size_t k = 1; k < run.metrics.size(); ++k) {
    const double end_before =
        double(run.metrics[k - 1].start_ns) + run.metrics[k - 1].hook_seconds * 1e9;
    DDPH_CHILD_CHECK(double(run.metrics[k].start_ns) >= end_before,
                     "bucket %zu started before bucket %zu ended", k, k - 1);
  }
  return 0;
}

int same_as_one_lane(const std::string& hook, int rank, int world, const std::string& dir) {
  // Sizes that differ, so that lanes pairing the wrong buckets could not
  // pass; many, so that both lanes hold several.
  const std::vector<size_t> sizes = {1 << 18, 1000, 1 << 16, 7, 1 << 18, 1 << 12, 333, 1 << 17};
  StepResult one, two;
  if (int rc = run_step(hook, 1, sizes, rank, world, dir, &one)) return rc;
  if (int rc = run_step(hook, 2, sizes, rank, world, dir, &two)) return rc;
  for (size_t k = 0; k < sizes.size(); ++k)
    DDPH_CHILD_CHECK(std::memcmp(one.data[k].data(), two.data[k].data(), sizes[k] * 4) == 0,
                     "bucket %zu differs between one lane and two", k);
  std::vector<int> in_order;
  for (size_t k = 0; k < sizes.size(); ++k) in_order.push_back(int(k));
  DDPH_CHILD_CHECK(two.done_order == in_order, "dones out of submission order");
  DDPH_CHILD_CHECK(two.stats.buckets == sizes.size() && two.stats.steps == 1, "buckets %llu",
                   (unsigned long long)two.stats.buckets);
  DDPH_CHILD_CHECK(
      two.stats.bytes_in == one.stats.bytes_in && two.stats.bytes_out == one.stats.bytes_out,
      "bytes in %llu/%llu, out %llu/%llu (two lanes/one)", (unsigned long long)two.stats.bytes_in,
      (unsigned long long)one.stats.bytes_in, (unsigned long long)two.stats.bytes_out,
      (unsigned long long)one.stats.bytes_out);
  // Each bucket's record counts its own bytes, on whichever lane it ran.
  DDPH_CHILD_CHECK(two.metrics.size() == sizes.size(), "%zu records", two.metrics.size());
  uint64_t wire = 0;
  for (size_t k = 0; k < sizes.size(); ++k) {
    const ddph_bucket_metrics_t& r = two.metrics[k];
    DDPH_CHILD_CHECK(r.bucket == k && r.ok && r.bytes_in == one.metrics[k].bytes_in,
                     "record %zu: bucket %u, bytes in %llu", k, r.bucket,
                     (unsigned long long)r.bytes_in);
    DDPH_CHILD_CHECK(r.wire_bytes > 0, "record %zu: no wire bytes", k);
    wire += r.wire_bytes;
  }
  DDPH_CHILD_CHECK(wire <= two.stats.wire_bytes, "records' wire %llu above the total %llu",
                   (unsigned long long)wire, (unsigned long long)two.stats.wire_bytes);
  // In flight together: some bucket started before the one before it ended
  // (one lane never does, by construction).
  bool overlapped = false;
  for (size_t k = 1; k < sizes.size(); ++k) {
    const double end_before =
        double(two.metrics[k - 1].start_ns) + two.metrics[k - 1].hook_seconds * 1e9;
    overlapped = overlapped || double(two.metrics[k].start_ns) < end_before;
  }
  DDPH_CHILD_CHECK(overlapped, "no two buckets were in flight together");
  return 0;
}

TEST(Lanes, AllreduceOnTwoLanesIsBitIdenticalToOneWithDonesInOrder) {
  auto res = ddph_test::run_ranks(2, [](int rank, int world, const std::string& dir) {
    return same_as_one_lane("{family: default, name: allreduce}", rank, world, dir);
  });
  EXPECT_TRUE(ddph_test::all_passed(res)) << ddph_test::describe(res);
}

TEST(Lanes, Fp16WrapperAroundAllreduceOnTwoLanesIsBitIdenticalToOne) {
  auto res = ddph_test::run_ranks(3, [](int rank, int world, const std::string& dir) {
    return same_as_one_lane(
        "{family: default, name: fp16_wrapper, wrap: {family: default, name: allreduce}}", rank,
        world, dir);
  });
  EXPECT_TRUE(ddph_test::all_passed(res)) << ddph_test::describe(res);
}

// ABI 1.9: quantization says per state whether it is stateless. Without
// error feedback its buckets run on lanes, bit for bit as on one; with it,
// each bucket's residual lives in one state, so they run one at a time.
TEST(Lanes, QuantizationWithoutErrorFeedbackRunsOnLanesBitIdenticalToOne) {
  auto res = ddph_test::run_ranks(2, [](int rank, int world, const std::string& dir) {
    return same_as_one_lane("{family: quantization, name: per_channel, options: {bits: 4}}", rank,
                            world, dir);
  });
  EXPECT_TRUE(ddph_test::all_passed(res)) << ddph_test::describe(res);
}

TEST(Lanes, QuantizationWithErrorFeedbackRunsOneBucketAtATime) {
  auto res = ddph_test::run_ranks(2, [](int rank, int world, const std::string& dir) {
    const std::vector<size_t> sizes = {1 << 16, 1 << 12, 1 << 16, 1 << 14};
    StepResult run;
    if (int rc = run_step(
            "{family: quantization, name: per_channel, options: {bits: 4, error_feedback: true}}",
            2, sizes, rank, world, dir, &run))
      return rc;
    return one_at_a_time(run);
  });
  EXPECT_TRUE(ddph_test::all_passed(res)) << ddph_test::describe(res);
}

// The ranks run the fewest lanes any of them offers: one rank offering one
// makes every rank run one, and the results still agree.
TEST(Lanes, ARankOfferingOneLaneMakesEveryRankRunOne) {
  auto res = ddph_test::run_ranks(2, [](int rank, int world, const std::string& dir) {
    const std::vector<size_t> sizes = {1 << 16, 100, 1 << 16, 5};
    StepResult run;
    if (int rc = run_step("{family: default, name: allreduce}", rank == 0 ? 1 : 2, sizes, rank,
                          world, dir, &run))
      return rc;
    return one_at_a_time(run);
  });
  EXPECT_TRUE(ddph_test::all_passed(res)) << ddph_test::describe(res);
}

TEST(Lanes, TheJobsCommLanesComesBeforeTheEnvironment) {
  auto res = ddph_test::run_ranks(2, [](int rank, int world, const std::string& dir) {
    // DDPH_LANES offers four lanes; the job's comm.lanes: 1 keeps one.
    setenv("DDPH_LANES", "4", 1);
    ddph_session_t* s = ddph_test::open_session(
        "comm: {backend: gloo, timeout: 30s, lanes: 1}\nhook: {family: default, name: "
        "allreduce}\n",
        rank, world, dir);
    unsetenv("DDPH_LANES");
    DDPH_CHILD_CHECK(s != nullptr, "the session did not open");
    const std::vector<size_t> sizes = {1 << 16, 100, 1 << 16, 5};
    StepResult run;
    int rc = run_open_step(s, sizes, rank, &run);
    ddph_session_close(s);
    if (rc) return rc;
    return one_at_a_time(run);
  });
  EXPECT_TRUE(ddph_test::all_passed(res)) << ddph_test::describe(res);
}

TEST(Lanes, ANumberOfLanesOutOfRangeIsRefusedNamingTheVariable) {
  auto res = ddph_test::run_ranks(2, [](int rank, int world, const std::string& dir) {
    setenv("DDPH_LANES", "0", 1);
    std::string error;
    ddph_session_t* s = ddph_test::open_session(yaml("{family: default, name: allreduce}"), rank,
                                                world, dir, &error);
    DDPH_CHILD_CHECK(s == nullptr && error.find("DDPH_LANES='0'") != std::string::npos,
                     "opened, or said: %s", error.c_str());
    return 0;
  });
  EXPECT_TRUE(ddph_test::all_passed(res)) << ddph_test::describe(res);
}

// A bad DDPH_LANES on one rank only: every rank refuses the job at open,
// naming that rank and the variable, long before the 30 s timeout that its
// peers would otherwise wait out for a rank that never connected.
TEST(Lanes, ABadNumberOfLanesOnOneRankIsRefusedOnEveryRankAtOpen) {
  auto res = ddph_test::run_ranks(3, [](int rank, int world, const std::string& dir) {
    if (rank == 1) setenv("DDPH_LANES", "17", 1);
    const auto start = std::chrono::steady_clock::now();
    const ddph_test::OpenOutcome out =
        ddph_test::open_outcome(yaml("{family: default, name: allreduce}"), rank, world, dir);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    DDPH_CHILD_CHECK(
        out.code == DDPH_INVALID_ARGUMENT &&
            out.message.find("rank 1: environment variable DDPH_LANES='17'") != std::string::npos,
        "rank %d: %d '%s'", rank, int(out.code), out.message.c_str());
    DDPH_CHILD_CHECK(seconds < 15, "rank %d: refused after %.1f s, not before the timeout", rank,
                     seconds);
    return 0;
  });
  EXPECT_TRUE(ddph_test::all_passed(res)) << ddph_test::describe(res);
}

}  // namespace
