// `hook: {family: auto}` in sessions over real Gloo ranks (each rank a
// process): the ranks take the same decisions, a switch away from error
// feedback keeps the sum of the gradients, the chooser's state survives a
// checkpoint, and a bad candidate list is refused at open, by name.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/fake_cuda_bucket.h"
#include "tests/support/multiprocess.h"
#include "tests/support/session_ranks.h"

namespace {

const bool kNoOverride = (unsetenv("DDPH_LANES"), unsetenv("DDPH_BUCKET_CHECK"), true);

std::string yaml(const std::string& options) {
  return "comm: {backend: gloo, timeout: 30s}\nhook: {family: auto, name: auto, options: {" +
         options + "}}\n";
}

// Values that differ per rank, step and element; `scale` multiplies them.
float gradient(int rank, uint64_t step, size_t bucket, size_t i, float scale) {
  const float v = std::sin(float(i) * 0.37f + float(step) * 1.3f + float(bucket) * 0.7f) +
                  0.25f * float(rank + 1) * std::cos(float(i % 113) * 0.11f);
  return scale * v;
}

struct Record {
  int32_t candidate, reason;
};

// Runs `steps` steps of buckets of `sizes` on s; per step and bucket the
// reduced values go to *reduced (when not NULL), the records to *records.
int run_steps(ddph_session_t* s, int rank, uint64_t first, uint64_t steps,
              const std::vector<size_t>& sizes, const std::vector<float>& scale_of_step,
              std::vector<std::vector<float>>* reduced, std::vector<Record>* records) {
  for (uint64_t k = first; k < first + steps; ++k) {
    std::vector<std::vector<float>> data(sizes.size());
    std::vector<ddph_test::FloatBucket> b;
    b.reserve(sizes.size());
    for (size_t j = 0; j < sizes.size(); ++j) {
      data[j].resize(sizes[j]);
      const float scale = k < scale_of_step.size() ? scale_of_step[k] : 1.0f;
      for (size_t i = 0; i < sizes[j]; ++i) data[j][i] = gradient(rank, k, j, i, scale);
      b.emplace_back(data[j], j, k, j + 1 == sizes.size());
    }
    for (size_t j = 0; j < sizes.size(); ++j) {
      std::string message;
      DDPH_CHILD_CHECK(ddph_test::run_bucket(s, b[j].bucket, &message) == DDPH_OK,
                       "step %llu bucket %zu: %s", (unsigned long long)k, j, message.c_str());
    }
    if (reduced != nullptr)
      for (auto& d : data) reduced->push_back(d);
  }
  ddph_bucket_metrics_t m{};
  m.struct_size = sizeof m;
  int32_t taken = 0;
  while (records != nullptr && ddph_session_take_metrics(s, &m, &taken) == nullptr && taken)
    records->push_back(Record{m.candidate, m.choice_reason});
  return 0;
}

int count(const std::vector<Record>& r, int32_t reason) {
  int n = 0;
  for (const Record& x : r) n += x.reason == reason;
  return n;
}

TEST(AutoSession, EveryRankRunsEachBucketOnTheSameCandidateAndGetsTheSameResult) {
  auto res = ddph_test::run_ranks(2, [](int rank, int world, const std::string& dir) {
    ddph_session_t* s = ddph_test::open_session(
        yaml("candidates: 'allreduce,fp16,q8,q4ef', warmup_steps: 3, recheck_steps: 2"), rank,
        world, dir);
    DDPH_CHILD_CHECK(s != nullptr, "open");
    const std::vector<size_t> sizes = {1 << 18, 1 << 16, 5000};
    std::vector<std::vector<float>> reduced;
    std::vector<Record> records;
    if (int rc = run_steps(s, rank, 0, 40, sizes, {}, &reduced, &records)) return rc;
    DDPH_CHILD_CHECK(records.size() == 40 * sizes.size(), "%zu records", records.size());
    // Warm-up: allreduce (candidate 0), whose mean is exact enough to check.
    for (size_t j = 0; j < 3 * sizes.size(); ++j) {
      DDPH_CHILD_CHECK(records[j].candidate == 0 && records[j].reason == DDPH_CHOICE_WARMUP,
                       "record %zu: candidate %d reason %d", j, records[j].candidate,
                       records[j].reason);
    }
    for (size_t i = 0; i < sizes[0]; i += 997) {
      const float mean = (gradient(0, 0, 0, i, 1) + gradient(1, 0, 0, i, 1)) / 2;
      DDPH_CHILD_CHECK(std::fabs(reduced[0][i] - mean) <= 1e-6f * (1 + std::fabs(mean)),
                       "element %zu: %g, mean %g", i, double(reduced[0][i]), double(mean));
    }
    DDPH_CHILD_CHECK(count(records, DDPH_CHOICE_EXPLORE) > 0, "never explored");
    DDPH_CHILD_CHECK(count(records, DDPH_CHOICE_FASTEST) > 0, "never decided");
    for (const Record& r : records)
      DDPH_CHILD_CHECK(r.candidate >= 0 && r.candidate < 4, "candidate %d", r.candidate);
    // The same candidate and reason for every bucket on both ranks, and the
    // same reduced values (a bucket two candidates reduced would differ).
    DDPH_CHILD_CHECK(
        ddph_test::same_on_all_ranks(s, records.data(), records.size() * sizeof(Record)),
        "the ranks chose differently");
    for (size_t k = 0; k < reduced.size(); ++k)
      DDPH_CHILD_CHECK(
          ddph_test::same_on_all_ranks(s, reduced[k].data(), reduced[k].size() * sizeof(float)),
          "bucket result %zu differs between the ranks", k);
    ddph_session_close(s);
    return 0;
  });
  EXPECT_TRUE(ddph_test::all_passed(res)) << ddph_test::describe(res);
}

// Deterministic at 100 Mbit/s, 4-bit with error feedback wins; the gradients
// grow tenfold at step 6, the norm test sees it at steps 6 and 7 and holds
// it back from step 8 on, and allreduce takes over. What 4-bit still owed
// (its residual) is flushed into allreduce's first bucket: the sum over
// the steps of the reduced values equals the sum of the true means.
TEST(AutoSession, ASwitchAwayFromErrorFeedbackKeepsTheSumOfTheGradients) {
  auto res = ddph_test::run_ranks(2, [](int rank, int world, const std::string& dir) {
    ddph_session_t* s = ddph_test::open_session(
        yaml("candidates: 'allreduce,q4ef', deterministic: true, link_mbit: 100, "
             "warmup_steps: 0, recheck_steps: 1, norm_jump: 0.5, hold_steps: 1000"),
        rank, world, dir);
    DDPH_CHILD_CHECK(s != nullptr, "open");
    const size_t n = 1 << 16;
    const std::vector<float> scale = {1, 1, 1, 1, 1, 1, 10, 10, 10, 10};
    std::vector<std::vector<float>> reduced;
    std::vector<Record> records;
    if (int rc = run_steps(s, rank, 0, 10, {n}, scale, &reduced, &records)) return rc;
    DDPH_CHILD_CHECK(records.size() == 10, "%zu records", records.size());
    for (size_t k = 0; k < 10; ++k) {
      const int32_t want = k < 8 ? 1 : 0;
      const int32_t why = k < 8 ? DDPH_CHOICE_MODEL : DDPH_CHOICE_CRITICAL;
      DDPH_CHILD_CHECK(records[k].candidate == want && records[k].reason == why,
                       "step %zu: candidate %d reason %d", k, records[k].candidate,
                       records[k].reason);
    }
    double worst = 0, worst_one_step = 0;
    for (size_t i = 0; i < n; ++i) {
      double got = 0, want = 0;
      for (size_t k = 0; k < 10; ++k) {
        got += reduced[k][i];
        want += (double(gradient(0, k, 0, i, scale[k])) + gradient(1, k, 0, i, scale[k])) / 2;
      }
      worst = std::max(worst, std::fabs(got - want));
      const double mean6 =
          (double(gradient(0, 6, 0, i, scale[6])) + gradient(1, 6, 0, i, scale[6])) / 2;
      worst_one_step = std::max(worst_one_step, std::fabs(double(reduced[6][i]) - mean6));
    }
    // 4-bit's own error on one step is large; the sum's error is rounding.
    DDPH_CHILD_CHECK(worst_one_step > 0.05, "4-bit's step-6 error %g: not 4-bit?", worst_one_step);
    DDPH_CHILD_CHECK(worst < 1e-4, "the sum is off by %g (4-bit's one-step error: %g)", worst,
                     worst_one_step);
    ddph_session_close(s);
    return 0;
  });
  EXPECT_TRUE(ddph_test::all_passed(res)) << ddph_test::describe(res);
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

struct LogLines {
  std::string text;
  static void sink(void* user, ddph_log_level_t, const char*, int, const char* message) {
    static_cast<LogLines*>(user)->text += std::string(message) + "\n";
  }
};

const char* const kCheckpointed = "candidates: 'allreduce,fp16', warmup_steps: 2, recheck_steps: 2";

TEST(AutoSession, ACheckpointResumesTheChooserAndAnotherWorldSizeStartsItFresh) {
  const std::string blob_dir = ddph_test::make_temp_dir("ddph-auto-ckpt");
  auto res = ddph_test::run_ranks(2, [&](int rank, int world, const std::string& dir) {
    ddph_session_t* s = ddph_test::open_session(yaml(kCheckpointed), rank, world, dir);
    DDPH_CHILD_CHECK(s != nullptr, "open");
    if (int rc = run_steps(s, rank, 0, 20, {1 << 16}, {}, nullptr, nullptr)) return rc;
    const std::string blob = ddph_test::session_state(s);
    DDPH_CHILD_CHECK(!blob.empty(), "save");
    ddph_session_close(s);
    if (rank == 0) std::ofstream(blob_dir + "/state", std::ios::binary) << blob;
    // A new session of the same world: loaded, it goes on deciding; not
    // loaded, it warms up again.
    for (const bool load : {true, false}) {
      ddph_session_t* t =
          ddph_test::open_session(yaml(kCheckpointed), rank, world, dir + (load ? "/a" : "/b"));
      DDPH_CHILD_CHECK(t != nullptr, "reopen");
      std::string message;
      if (load)
        DDPH_CHILD_CHECK(ddph_test::load_state(t, blob, &message) == DDPH_OK, "load: %s",
                         message.c_str());
      std::vector<Record> records;
      if (int rc = run_steps(t, rank, 20, 1, {1 << 16}, {}, nullptr, &records)) return rc;
      DDPH_CHILD_CHECK(records.size() == 1, "%zu records", records.size());
      DDPH_CHILD_CHECK((records[0].reason == DDPH_CHOICE_WARMUP) == !load, "loaded %d: reason %d",
                       int(load), records[0].reason);
      ddph_session_close(t);
    }
    return 0;
  });
  ASSERT_TRUE(ddph_test::all_passed(res)) << ddph_test::describe(res);
  const std::string blob = read_file(blob_dir + "/state");
  ASSERT_FALSE(blob.empty());
  res = ddph_test::run_ranks(1, [&](int rank, int world, const std::string& dir) {
    LogLines log;
    ddph_set_log_sink(&LogLines::sink, &log, DDPH_LOG_WARN);
    ddph_session_t* s = ddph_test::open_session(yaml(kCheckpointed), rank, world, dir);
    DDPH_CHILD_CHECK(s != nullptr, "open");
    std::string message;
    DDPH_CHILD_CHECK(ddph_test::load_state(s, blob, &message) == DDPH_OK, "load: %s",
                     message.c_str());
    DDPH_CHILD_CHECK(log.text.find("another world size") != std::string::npos, "log: %s",
                     log.text.c_str());
    std::vector<Record> records;
    if (int rc = run_steps(s, rank, 0, 1, {1 << 16}, {}, nullptr, &records)) return rc;
    DDPH_CHILD_CHECK(records.size() == 1 && records[0].reason == DDPH_CHOICE_WARMUP, "reason %d",
                     records.empty() ? -1 : records[0].reason);
    ddph_session_close(s);
    ddph_set_log_sink(nullptr, nullptr, DDPH_LOG_WARN);
    return 0;
  });
  EXPECT_TRUE(ddph_test::all_passed(res)) << ddph_test::describe(res);
}

// Over a backend that may complete a GPU bucket once its work is enqueued
// (anything but Gloo and MPI, which stage it through the host and wait),
// the first GPU bucket logs, once, that the times auto compares need not
// be the transfers'. Gloo's GPU buckets log nothing. The warning comes
// before the candidate runs, so a bucket labelled GPU memory over host
// memory (refused later on a machine without a GPU) is enough.
TEST(AutoSession, GpuBucketsOverABackendThatOnlyEnqueuesAreWarnedOfOnce) {
  auto res = ddph_test::run_ranks(1, [](int rank, int world, const std::string& dir) {
    LogLines log;
    ddph_set_log_sink(&LogLines::sink, &log, DDPH_LOG_WARN);
    ddph_session_t* lender = ddph_test::open_session(yaml(""), rank, world, dir);
    DDPH_CHILD_CHECK(lender != nullptr, "open");
    std::string error;
    ddph_session_t* s =
        ddph_test::open_on_host_comm("comm: {backend: host}\nhook: {family: auto, name: auto}\n",
                                     rank, world, ddph_session_comm(lender), &error);
    DDPH_CHILD_CHECK(s != nullptr, "open on the host's comm: %s", error.c_str());
    const char* const kWarning = "is in GPU memory and comm backend";
    for (ddph_session_t* session : {lender, s})
      for (uint64_t step = 0; step < 2; ++step) {
        ddph_test::FakeCudaBucket gpu;
        gpu.bucket.step = step;
        std::string message;
        ddph_test::run_bucket(session, gpu.bucket, &message);  // refused without a GPU
        if (session == lender)
          DDPH_CHILD_CHECK(log.text.find(kWarning) == std::string::npos,
                           "Gloo's GPU bucket warned: %s", log.text.c_str());
      }
    const size_t at = log.text.find(kWarning);
    DDPH_CHILD_CHECK(
        at != std::string::npos &&
            log.text.find("auto: bucket 0 is in GPU memory and comm backend 'host' "
                          "may complete a bucket once its work is enqueued") != std::string::npos,
        "no warning: %s", log.text.c_str());
    DDPH_CHILD_CHECK(log.text.find(kWarning, at + 1) == std::string::npos, "warned twice: %s",
                     log.text.c_str());
    ddph_session_close(s);
    ddph_session_close(lender);
    ddph_set_log_sink(nullptr, nullptr, DDPH_LOG_WARN);
    return 0;
  });
  EXPECT_TRUE(ddph_test::all_passed(res)) << ddph_test::describe(res);
}

TEST(AutoSession, TheChooserKnowsHowLongTheBackwardRanOnAfterEachBucket) {
  // A backward that submits bucket 0, computes 60 ms, then submits bucket
  // 1: the chooser's log says so for bucket 0 and says nothing of bucket 1,
  // and bucket 0 runs allreduce.
  auto res = ddph_test::run_ranks(2, [](int rank, int world, const std::string& dir) {
    LogLines log;
    ddph_set_log_sink(&LogLines::sink, &log, DDPH_LOG_DEBUG);
    // drift 100: sub-millisecond times on loopback move by factors of 2,
    // and a new round would end the run exploring.
    ddph_session_t* s = ddph_test::open_session(
        yaml("candidates: 'allreduce,fp16', warmup_steps: 2, recheck_steps: 2, drift: 100"), rank,
        world, dir);
    DDPH_CHILD_CHECK(s != nullptr, "open");
    struct Done {
      int count = 0;
      std::string errors;
      static void on_done(void* user, ddph_error_t* e) {
        auto* d = static_cast<Done*>(user);
        ++d->count;
        if (e != nullptr) d->errors += std::string(ddph_error_message(e)) + "\n";
        ddph_error_free(e);
      }
    } done;
    const uint64_t steps = 12;
    for (uint64_t k = 0; k < steps; ++k) {
      std::vector<float> a(1 << 14, 1.0f), b(1 << 12, 2.0f);
      ddph_test::FloatBucket first(a, 0, k, false), second(b, 1, k, true);
      ddph_error_t* e = ddph_session_submit(s, &first.bucket, &Done::on_done, &done);
      DDPH_CHILD_CHECK(e == nullptr, "submit: %s", ddph_error_message(e));
      std::this_thread::sleep_for(std::chrono::milliseconds(60));
      e = ddph_session_submit(s, &second.bucket, &Done::on_done, &done);
      DDPH_CHILD_CHECK(e == nullptr, "submit: %s", ddph_error_message(e));
      ddph_error_free(ddph_session_flush(s));
    }
    DDPH_CHILD_CHECK(done.count == int(2 * steps) && done.errors.empty(), "%d dones: %s",
                     done.count, done.errors.c_str());
    ddph_session_close(s);
    ddph_set_log_sink(nullptr, nullptr, DDPH_LOG_WARN);
    // The last decision line: "bucket 0 (65536 bytes, 60.1 ms of backward
    // after it): ...; bucket 1 (16384 bytes): ...".
    const size_t line = log.text.rfind("auto: step ");
    DDPH_CHILD_CHECK(line != std::string::npos, "no decision logged: %s", log.text.c_str());
    const std::string last = log.text.substr(line, log.text.find('\n', line) - line);
    const std::string zero = "bucket 0 (65536 bytes, ";
    const size_t at = last.find(zero);
    DDPH_CHILD_CHECK(at != std::string::npos, "%s", last.c_str());
    const double ms = std::atof(last.c_str() + at + zero.size());
    DDPH_CHILD_CHECK(ms >= 50 && ms < 1000, "bucket 0: %.1f ms of backward after it: %s", ms,
                     last.c_str());
    DDPH_CHILD_CHECK(last.find("bucket 1 (16384 bytes):") != std::string::npos, "%s", last.c_str());
    // 60 ms hide any candidate's time on loopback: bucket 0 runs the least
    // compressed, allreduce, whichever is fastest.
    DDPH_CHILD_CHECK(last.find("after it): allreduce, fastest") != std::string::npos, "%s",
                     last.c_str());
    return 0;
  });
  EXPECT_TRUE(ddph_test::all_passed(res)) << ddph_test::describe(res);
}

TEST(AutoSession, RanksWithDifferentAutoSettingsAreRefusedAtOpen) {
  // Ranks that weigh candidates differently would pair buckets of
  // different candidates: every rank is refused, naming the setting.
  auto res = ddph_test::run_ranks(2, [](int rank, int world, const std::string& dir) {
    const std::string margin = rank == 0 ? "0.25" : "0.5";
    const ddph_test::OpenOutcome o =
        ddph_test::open_outcome(yaml("lossy_margin: " + margin), rank, world, dir);
    DDPH_CHILD_CHECK(o.code == DDPH_INVALID_ARGUMENT, "code %d: %s", int(o.code),
                     o.message.c_str());
    DDPH_CHILD_CHECK(
        o.message.find("the ranks disagree on the hook configuration") != std::string::npos &&
            o.message.find("lossy_margin=") != std::string::npos,
        "%s", o.message.c_str());
    return 0;
  });
  EXPECT_TRUE(ddph_test::all_passed(res)) << ddph_test::describe(res);
}

struct Refusal {
  std::string hook;      // the YAML's hook: line, or a rules: block
  std::string expected;  // in the message
};

TEST(AutoSession, BadCandidatesAndSettingsAreRefusedAtOpenByName) {
  const std::vector<Refusal> cases = {
      {"{family: auto, name: auto, options: {candidates: ''}}", "empty: name at least one"},
      {"{family: auto, name: auto, options: {candidates: 'allreduce,q3'}}",
       "hook.options.candidates[1]: unknown candidate 'q3'"},
      {"{family: auto, name: auto, options: {candidates: 'allreduce,,q8'}}",
       "hook.options.candidates[1]: an empty candidate"},
      {"{family: auto, name: auto, options: {candidates: 'q8,fp16,q8'}}",
       "candidate 'q8' is named twice"},
      {"{family: auto, name: auto, options: {candidates: 'allreduce,mixed_precision/"
       "allreduce_upcast'}}",
       "candidate 'mixed_precision/allreduce_upcast' (mixed_precision/allreduce_upcast) takes "
       "the parameters"},
      {"{family: auto, name: auto, options: {candidates: 'allreduce,nosuchfamily/x'}}",
       "hook.options.candidates[1].family"},
      {"{family: auto, name: auto, options: {candidates: 'allreduce,default/nosuchhook'}}",
       "hook.options.candidates[1].name: family 'default' has no hook 'nosuchhook'"},
      {"{family: auto, name: auto, options: {candidates: 'allreduce,auto/auto'}}",
       "an auto hook cannot be a candidate"},
      {"{family: auto, name: chooser}", "family 'auto' has one hook, 'auto'"},
      {"{family: auto, name: auto, wrap: {family: default, name: allreduce}}",
       "'auto' does not wrap another hook"},
      {"{family: auto, name: auto, options: {deterministic: true}}",
       "deterministic: true needs the link rate"},
      {"{family: auto, name: auto, options: {explore_share: 0.9}}", "explore_share"},
      {"{family: auto, name: auto, options: {max_compression: nan}}", "max_compression"},
      {"{family: auto, name: auto, options: {bits: 4}}", "bits"},
      // Both problems at once: the candidates are checked past a bad option.
      {"{family: auto, name: auto, options: {drift: -1, candidates: 'q8,zz'}}",
       "hook.options.candidates[1]: unknown candidate 'zz'"},
      {"{family: default, name: allreduce}\nrules:\n  - {when: {max_bytes: 1000}, hook: {family: "
       "auto, name: auto}}",
       "'auto' chooses the job's hook (hook:) and cannot be a rule's"},
  };
  for (const Refusal& c : cases) {
    const std::string dir = ddph_test::make_temp_dir("ddph-auto-refused");
    const ddph_test::OpenOutcome o = ddph_test::open_outcome(
        "comm: {backend: gloo, timeout: 10s}\nhook: " + c.hook + "\n", 0, 1, dir);
    EXPECT_NE(o.code, DDPH_OK) << c.hook;
    EXPECT_NE(o.message.find(c.expected), std::string::npos)
        << c.hook << "\nwanted: " << c.expected << "\ngot: " << o.message;
  }
}

TEST(AutoSession, TheDefaultCandidatesOpenAndRunOnOneRank) {
  auto res = ddph_test::run_ranks(1, [](int rank, int world, const std::string& dir) {
    // lossy_margin 0: one rank's buckets take microseconds of a step that
    // fills its gradients for a millisecond, where no lossy candidate
    // could pay and none would be explored.
    ddph_session_t* s = ddph_test::open_session(
        "comm: {backend: gloo}\nhook: {family: auto, name: auto, options: {lossy_margin: 0}}\n",
        rank, world, dir);
    DDPH_CHILD_CHECK(s != nullptr, "open");
    std::vector<std::vector<float>> reduced;
    std::vector<Record> records;
    if (int rc = run_steps(s, rank, 0, 60, {1 << 16}, {}, &reduced, &records)) return rc;
    // Six candidates, every one of them used: warm-up, then each explored
    // (16-bit may be skipped) before the fastest is chosen.
    std::vector<int> used(6, 0);
    for (const Record& r : records) used[size_t(r.candidate)] = 1;
    DDPH_CHILD_CHECK(used[0] && used[3] && used[4] && used[5], "not every candidate ran");
    DDPH_CHILD_CHECK(records.back().reason == DDPH_CHOICE_FASTEST ||
                         records.back().reason == DDPH_CHOICE_EXPLORE,
                     "reason %d", records.back().reason);
    ddph_session_close(s);
    return 0;
  });
  EXPECT_TRUE(ddph_test::all_passed(res)) << ddph_test::describe(res);
}

}  // namespace
