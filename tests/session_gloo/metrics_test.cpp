// Per-bucket metrics (ddph_session_take_metrics) and the host's log sink
// (ddph_set_log_sink) on two real ranks over Gloo, through the public API.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "tests/support/multiprocess.h"
#include "tests/support/session_ranks.h"

namespace {

using ddph_test::FloatBucket;

const size_t kBucketFloats[2] = {1000, 333};  // the two buckets of every step

struct Taken {
  ddph_code_t code = DDPH_OK;
  std::vector<ddph_bucket_metrics_t> records;
};

// Takes every record the session has, in the order it hands them out.
Taken take_all(ddph_session_t* s) {
  Taken t;
  while (true) {
    ddph_bucket_metrics_t r{};
    r.struct_size = sizeof r;
    int32_t taken = -1;
    ddph_error_t* e = ddph_session_take_metrics(s, &r, &taken);
    if (e != nullptr) {
      t.code = ddph_error_code(e);
      ddph_error_free(e);
      return t;
    }
    if (taken == 0) return t;
    t.records.push_back(r);
  }
}

// Three steps of two buckets, both submitted before the flush (so that the
// second one queues behind the first), then checks every record against
// the buckets' byte sizes. bytes_out is what the hook gives collectives per
// byte in: 1 for allreduce, 1/2 for fp16_compress.
int three_steps(const char* hook, size_t out_per_in_halves, int rank, int world,
                const std::string& dir) {
  ddph_session_t* s = ddph_test::open_session(
      std::string("comm: {backend: gloo, timeout: 20s}\nhook: {family: default, name: ") + hook +
          "}\n",
      rank, world, dir);
  DDPH_CHILD_CHECK(s != nullptr, "open %s", hook);
  Taken before = take_all(s);
  DDPH_CHILD_CHECK(before.code == DDPH_OK && before.records.empty(),
                   "%zu records before any bucket", before.records.size());
  for (uint64_t step = 0; step < 3; ++step) {
    std::vector<float> a(kBucketFloats[0], 1.0f), b(kBucketFloats[1], 2.0f);
    FloatBucket ba(a, 0, step, false), bb(b, 1, step, true);
    ddph_code_t codes[2] = {DDPH_INTERNAL, DDPH_INTERNAL};
    auto record = [](void* user, ddph_error_t* e) {
      *static_cast<ddph_code_t*>(user) = ddph_error_code(e);
      ddph_error_free(e);
    };
    DDPH_CHILD_CHECK(ddph_session_submit(s, &ba.bucket, record, &codes[0]) == nullptr, "submit");
    DDPH_CHILD_CHECK(ddph_session_submit(s, &bb.bucket, record, &codes[1]) == nullptr, "submit");
    DDPH_CHILD_CHECK(ddph_session_flush(s) == nullptr, "flush");
    DDPH_CHILD_CHECK(codes[0] == DDPH_OK && codes[1] == DDPH_OK, "bucket errors %d %d", codes[0],
                     codes[1]);
  }
  Taken t = take_all(s);
  DDPH_CHILD_CHECK(t.code == DDPH_OK, "take_metrics failed with code %d", t.code);
  DDPH_CHILD_CHECK(t.records.size() == 6, "%zu records, want 6", t.records.size());
  for (size_t i = 0; i < 6; ++i) {
    const ddph_bucket_metrics_t& r = t.records[i];
    const uint64_t bytes = kBucketFloats[i % 2] * sizeof(float);
    DDPH_CHILD_CHECK(r.struct_size == sizeof r, "record %zu struct_size %zu", i, r.struct_size);
    DDPH_CHILD_CHECK(r.step == i / 2 && r.bucket == i % 2 && r.is_last == int32_t(i % 2),
                     "record %zu is step %llu bucket %u is_last %d", i, (unsigned long long)r.step,
                     r.bucket, r.is_last);
    DDPH_CHILD_CHECK(r.bytes_in == bytes, "record %zu: bytes_in %llu, want %llu", i,
                     (unsigned long long)r.bytes_in, (unsigned long long)bytes);
    DDPH_CHILD_CHECK(2 * r.bytes_out == bytes * out_per_in_halves,
                     "%s record %zu: bytes_out %llu for %llu bytes in", hook, i,
                     (unsigned long long)r.bytes_out, (unsigned long long)bytes);
    DDPH_CHILD_CHECK(r.wire_bytes > 0, "record %zu: no wire bytes on Gloo", i);
    DDPH_CHILD_CHECK(r.ok == 1, "record %zu not ok", i);
    DDPH_CHILD_CHECK(r.queue_seconds >= 0 && r.hook_seconds > 0 && r.hook_seconds < 20,
                     "record %zu: queue %g s, hook %g s", i, r.queue_seconds, r.hook_seconds);
  }
  // The records add up to the session's running totals.
  ddph_stats_t st{};
  st.struct_size = sizeof st;
  DDPH_CHILD_CHECK(ddph_session_stats(s, &st) == nullptr, "stats");
  uint64_t in = 0, wire = 0;
  for (const ddph_bucket_metrics_t& r : t.records) in += r.bytes_in, wire += r.wire_bytes;
  DDPH_CHILD_CHECK(in == st.bytes_in, "records' bytes_in %llu, stats %llu", (unsigned long long)in,
                   (unsigned long long)st.bytes_in);
  DDPH_CHILD_CHECK(wire <= st.wire_bytes, "records' wire %llu > stats %llu",
                   (unsigned long long)wire, (unsigned long long)st.wire_bytes);
  Taken after = take_all(s);
  DDPH_CHILD_CHECK(after.records.empty(), "%zu records after the last", after.records.size());
  ddph_session_close(s);
  return 0;
}

TEST(SessionMetrics, AllreduceRecordsEveryBucketInOrder) {
  auto res = ddph_test::run_ranks(2, [](int rank, int world, const std::string& dir) {
    return three_steps("allreduce", 2, rank, world, dir);
  });
  EXPECT_TRUE(ddph_test::all_passed(res)) << ddph_test::describe(res);
}

TEST(SessionMetrics, Fp16CompressSendsHalfTheBytes) {
  auto res = ddph_test::run_ranks(2, [](int rank, int world, const std::string& dir) {
    return three_steps("fp16_compress", 1, rank, world, dir);
  });
  EXPECT_TRUE(ddph_test::all_passed(res)) << ddph_test::describe(res);
}

TEST(SessionMetrics, RefusesARecordSmallerThanV1_5) {
  auto res = ddph_test::run_ranks(1, [](int rank, int world, const std::string& dir) {
    ddph_session_t* s = ddph_test::open_session(
        "comm: {backend: gloo}\nhook: {family: default, name: allreduce}\n", rank, world, dir);
    DDPH_CHILD_CHECK(s != nullptr, "open");
    ddph_bucket_metrics_t r{};
    r.struct_size = DDPH_BUCKET_METRICS_SIZE_V1_5 - 1;
    int32_t taken = 7;
    ddph_error_t* e = ddph_session_take_metrics(s, &r, &taken);
    DDPH_CHILD_CHECK(e != nullptr && ddph_error_code(e) == DDPH_INVALID_ARGUMENT, "accepted");
    const std::string message = ddph_error_message(e);
    ddph_error_free(e);
    DDPH_CHILD_CHECK(message.find("struct_size") != std::string::npos, "%s", message.c_str());
    DDPH_CHILD_CHECK(taken == 0, "taken %d", taken);
    e = ddph_session_take_metrics(s, &r, nullptr);
    DDPH_CHILD_CHECK(e != nullptr && ddph_error_code(e) == DDPH_INVALID_ARGUMENT, "NULL taken");
    ddph_error_free(e);
    ddph_session_close(s);
    return 0;
  });
  EXPECT_TRUE(ddph_test::all_passed(res)) << ddph_test::describe(res);
}

// What a test's sink received.
struct Lines {
  std::mutex mu;
  std::vector<std::string> text;  // "level family rank: message"
  static void sink(void* user, ddph_log_level_t level, const char* family, int32_t rank,
                   const char* message) {
    auto* lines = static_cast<Lines*>(user);
    std::lock_guard<std::mutex> lock(lines->mu);
    lines->text.push_back(std::to_string(int(level)) + " " + (family ? family : "(null)") + " " +
                          std::to_string(rank) + ": " + message);
  }
};

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// PowerSGD logs each step at debug level: the sink gets the line with the
// family and this process's rank (once, not "powersgd: powersgd:"), and
// nothing reaches stderr; with the sink removed, stderr gets it again.
TEST(LogSink, GetsAPluginLineWithFamilyAndRankThenStderrAgain) {
  auto res = ddph_test::run_ranks(2, [](int rank, int world, const std::string& dir) {
    setenv("DDPH_LOG_LEVEL", "debug", 1);  // for stderr once the sink is gone
    const std::string err_path = dir + "/stderr." + std::to_string(rank);
    std::fflush(stderr);
    const int saved_stderr = dup(2);
    DDPH_CHILD_CHECK(std::freopen(err_path.c_str(), "w", stderr) != nullptr, "redirect");
    Lines lines;
    ddph_set_log_sink(&Lines::sink, &lines, DDPH_LOG_DEBUG);
    ddph_session_t* s = ddph_test::open_session(
        "comm: {backend: gloo, timeout: 20s}\nhook: {family: powersgd, name: batched_powersgd, "
        "options: {start_iter: 0, rank: 1, error_feedback: false, warm_start: false}}\n",
        rank, world, dir);
    std::vector<float> x(1024, 1.0f);
    FloatBucket b(x, 0, 0, true);
    const ddph_code_t first = s != nullptr ? ddph_test::run_bucket(s, b) : DDPH_INTERNAL;
    ddph_set_log_sink(nullptr, nullptr, DDPH_LOG_ERROR);
    FloatBucket b2(x, 0, 1, true);
    const ddph_code_t second = s != nullptr ? ddph_test::run_bucket(s, b2) : DDPH_INTERNAL;
    ddph_session_close(s);
    std::fflush(stderr);
    dup2(saved_stderr, 2);
    DDPH_CHILD_CHECK(s != nullptr && first == DDPH_OK && second == DDPH_OK, "open or run failed");

    const std::string want = std::to_string(int(DDPH_LOG_DEBUG)) + " powersgd " +
                             std::to_string(rank) + ": step 1 of batched_powersgd: ";
    size_t matches = 0;
    for (const std::string& line : lines.text) matches += line.rfind(want, 0) == 0;
    std::string all;
    for (const std::string& line : lines.text) all += line + "\n";
    DDPH_CHILD_CHECK(matches == 1, "want one line starting '%s', got:\n%s", want.c_str(),
                     all.c_str());
    const std::string err = read_file(err_path);
    DDPH_CHILD_CHECK(err.find("step 1 of") == std::string::npos,
                     "the sink's line also reached stderr:\n%s", err.c_str());
    const std::string want_err =
        "ddph debug powersgd [rank " + std::to_string(rank) + "]: step 2 of batched_powersgd: ";
    DDPH_CHILD_CHECK(err.find(want_err) != std::string::npos,
                     "stderr lacks '%s' once the sink is removed:\n%s", want_err.c_str(),
                     err.c_str());
    return 0;
  });
  EXPECT_TRUE(ddph_test::all_passed(res)) << ddph_test::describe(res);
}

// A sink swapped while other threads log: every line reaches one of the
// sinks, nothing crashes.
TEST(LogSink, CanBeSwappedWhileSessionsLog) {
  auto res = ddph_test::run_ranks(2, [](int rank, int world, const std::string& dir) {
    Lines a, b;
    ddph_session_t* s = ddph_test::open_session(
        "comm: {backend: gloo, timeout: 20s}\nhook: {family: powersgd, name: batched_powersgd, "
        "options: {start_iter: 0, rank: 1, error_feedback: false, warm_start: false}}\n",
        rank, world, dir);
    DDPH_CHILD_CHECK(s != nullptr, "open");
    std::vector<float> x(256, 1.0f);
    const int steps = 200;
    std::vector<FloatBucket> buckets;
    buckets.reserve(steps);
    for (int i = 0; i < steps; ++i) buckets.emplace_back(x, 0, uint64_t(i), true);
    auto ignore = [](void*, ddph_error_t* e) { ddph_error_free(e); };
    for (int i = 0; i < steps; ++i) {
      DDPH_CHILD_CHECK(
          ddph_session_submit(s, &buckets[size_t(i)].bucket, ignore, nullptr) == nullptr, "submit");
      ddph_set_log_sink(&Lines::sink, i % 2 ? &a : &b, DDPH_LOG_DEBUG);
    }
    DDPH_CHILD_CHECK(ddph_session_flush(s) == nullptr, "flush");
    ddph_set_log_sink(nullptr, nullptr, DDPH_LOG_ERROR);
    ddph_session_close(s);
    size_t steps_logged = 0;
    for (Lines* l : {&a, &b})
      for (const std::string& line : l->text) steps_logged += line.find(": step ") != line.npos;
    DDPH_CHILD_CHECK(steps_logged >= size_t(steps) - 1, "%zu step lines of %d", steps_logged,
                     steps);
    return 0;
  });
  EXPECT_TRUE(ddph_test::all_passed(res)) << ddph_test::describe(res);
}

}  // namespace
