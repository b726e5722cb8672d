// Sessions over a hook flagged DDPH_HOOK_PIPELINED (ABI 1.6): the worker
// starts the next bucket without waiting for done, the dones come from the
// session's second thread in submission order, and flush, checkpoints and close wait
// for them. The hook (pipelined_plugin.cpp) completes each bucket after
// delay_ms and writes into the bucket how many earlier buckets were not
// done yet when it started; its "serial" twin lacks the flag.
#include <ddph/ddph.h>
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "test_paths.h"
#include "tests/loader/done_recorder.h"

using ddph_test::fixture_dir;

namespace {

std::string yaml(const std::string& name, const std::string& options) {
  return "plugin_path: [" + fixture_dir("good") + ", " + fixture_dir("pipelined") +
         "]\ncomm: {backend: fake}\nhook: {family: fixture_pipelined, name: " + name +
         ", options: " + options + "}\n";
}

struct Session {
  ddph_session_t* s = nullptr;
  explicit Session(const std::string& text) {
    ddph_session_options_t o{};
    o.struct_size = sizeof o;
    o.yaml_text = text.c_str();
    o.rank = -1;
    o.world_size = -1;
    ddph_error_t* e = ddph_session_open(&o, &s);
    EXPECT_EQ(e, nullptr) << ddph_error_message(e);
    ddph_error_free(e);
  }
  ~Session() { ddph_session_close(s); }
};

constexpr int64_t kNumel = 16;

struct Bucket {
  std::vector<float> data = std::vector<float>(kNumel, -1.0f);
  int64_t shape[1] = {kNumel};
  ddph_bucket_t b{};
  explicit Bucket(uint64_t index) {
    b.struct_size = sizeof b;
    b.index = index;
    b.buffer.data = data.data();
    b.buffer.device = {kDLCPU, 0};
    b.buffer.ndim = 1;
    b.buffer.dtype = {kDLFloat, 32, 1};
    b.buffer.shape = shape;
  }
  float not_done_at_start() const { return data[0]; }
  float run_order() const { return data[1]; }
  bool completed() const { return data[2] == 1.0f; }
  bool hook_saw_params_checked() const { return data[3] == 1.0f; }
};

std::vector<std::unique_ptr<Bucket>> submit(ddph_session_t* s, Recorder& rec, int n) {
  std::vector<std::unique_ptr<Bucket>> buckets;
  for (int i = 0; i < n; ++i) {
    buckets.push_back(std::make_unique<Bucket>(uint64_t(i)));
    EXPECT_EQ(ddph_session_submit(s, &buckets.back()->b, &Recorder::done, &rec.tokens[size_t(i)]),
              nullptr);
  }
  return buckets;
}

void append(void* sink, const void* bytes, size_t n) {
  static_cast<std::string*>(sink)->append(static_cast<const char*>(bytes), n);
}

std::vector<int> iota(int n) {
  std::vector<int> v;
  for (int i = 0; i < n; ++i) v.push_back(i);
  return v;
}

}  // namespace

TEST(PipelinedSession, BucketsStartBeforeThePreviousDoneAndDonesComeInOrder) {
  Session s(yaml("pipelined", "{delay_ms: 50}"));
  const int n = 6;
  Recorder rec(n);
  auto buckets = submit(s.s, rec, n);
  // stats while the hook's thread completes buckets (TSan's concern).
  ddph_stats_t st{};
  st.struct_size = sizeof st;
  ASSERT_EQ(ddph_session_stats(s.s, &st), nullptr);
  ASSERT_EQ(ddph_session_flush(s.s), nullptr);
  // flush returned only once every done had.
  ASSERT_EQ(rec.calls.load(), n);
  EXPECT_EQ(rec.order, iota(n));
  for (int i = 0; i < n; ++i) {
    const Bucket& b = *buckets[size_t(i)];
    EXPECT_TRUE(b.completed()) << i;
    EXPECT_EQ(b.run_order(), float(i));
    // Each bucket started while the one before it was still on the hook's
    // thread (50 ms each): the worker did not wait for its done.
    if (i > 0) {
      EXPECT_GE(b.not_done_at_start(), 1.0f) << "bucket " << i;
    }
  }
  ASSERT_EQ(ddph_session_stats(s.s, &st), nullptr);
  EXPECT_EQ(st.buckets, uint64_t(n));
  EXPECT_EQ(st.bytes_in, uint64_t(n * kNumel * 4));
}

TEST(PipelinedSession, TheSameHookWithoutTheFlagRunsOneBucketAtATime) {
  Session s(yaml("serial", "{delay_ms: 10}"));
  const int n = 5;
  Recorder rec(n);
  auto buckets = submit(s.s, rec, n);
  ASSERT_EQ(ddph_session_flush(s.s), nullptr);
  ASSERT_EQ(rec.calls.load(), n);
  EXPECT_EQ(rec.order, iota(n));
  for (int i = 0; i < n; ++i) {
    EXPECT_TRUE(buckets[size_t(i)]->completed()) << i;
    EXPECT_EQ(buckets[size_t(i)]->not_done_at_start(), 0.0f) << "bucket " << i;
  }
}

TEST(PipelinedSession, ErrorsAndMetricsLandFromTheHooksThread) {
  Session s(yaml("pipelined", "{delay_ms: 20, fail_run: 2, fail_code: 5}"));  // COMM_FAILURE
  const int n = 5;
  Recorder rec(n);
  auto buckets = submit(s.s, rec, n);
  ddph_error_t* e = ddph_session_flush(s.s);
  EXPECT_EQ(ddph_error_code(e), DDPH_COMM_FAILURE);
  EXPECT_NE(std::string(ddph_error_message(e)).find("failing as told"), std::string::npos)
      << ddph_error_message(e);
  ddph_error_free(e);
  ASSERT_EQ(rec.calls.load(), n);
  EXPECT_EQ(rec.order, iota(n));
  EXPECT_EQ(rec.codes[0], DDPH_OK);
  EXPECT_EQ(rec.codes[1], DDPH_OK);
  EXPECT_EQ(rec.codes[2], DDPH_COMM_FAILURE);
  uint64_t ok = 0;
  for (ddph_code_t c : rec.codes) ok += c == DDPH_OK;

  // One record per bucket, in submission order, as the dones reported them.
  for (int i = 0; i < n; ++i) {
    ddph_bucket_metrics_t m{};
    m.struct_size = sizeof m;
    int32_t taken = 0;
    ASSERT_EQ(ddph_session_take_metrics(s.s, &m, &taken), nullptr);
    ASSERT_EQ(taken, 1) << i;
    EXPECT_EQ(m.bucket, uint32_t(i));
    EXPECT_EQ(m.ok, rec.codes[size_t(i)] == DDPH_OK ? 1 : 0) << i;
    if (i < 3) {
      EXPECT_EQ(m.bytes_in, uint64_t(kNumel * 4)) << i;
      EXPECT_GE(m.hook_seconds, 0.015) << i;  // until its done, not until run_bucket returned
    }
  }
  ddph_stats_t st{};
  st.struct_size = sizeof st;
  ASSERT_EQ(ddph_session_stats(s.s, &st), nullptr);
  EXPECT_EQ(st.buckets, ok);

  // The comm failure broke the session: a later bucket fails at once.
  Recorder later(1);
  Bucket b(0);
  ASSERT_EQ(ddph_session_submit(s.s, &b.b, &Recorder::done, &later.tokens[0]), nullptr);
  e = ddph_session_flush(s.s);
  EXPECT_EQ(ddph_error_code(e), DDPH_COMM_FAILURE);
  EXPECT_NE(std::string(ddph_error_message(e))
                .find("session is broken since: DDPH_COMM_FAILURE: fixture_pipelined: failing"),
            std::string::npos)
      << ddph_error_message(e);
  ddph_error_free(e);
  EXPECT_FALSE(b.completed());  // the hook never saw it
}

TEST(PipelinedSession, AnErrorOtherThanACommFailureLeavesTheSessionUsable) {
  Session s(yaml("pipelined", "{delay_ms: 5, fail_run: 1, fail_code: 1}"));  // INVALID_ARGUMENT
  Recorder rec(4);
  auto buckets = submit(s.s, rec, 4);
  ddph_error_t* e = ddph_session_flush(s.s);
  EXPECT_EQ(ddph_error_code(e), DDPH_INVALID_ARGUMENT);
  ddph_error_free(e);
  ASSERT_EQ(rec.calls.load(), 4);
  EXPECT_EQ(rec.codes,
            (std::vector<ddph_code_t>{DDPH_OK, DDPH_INVALID_ARGUMENT, DDPH_OK, DDPH_OK}));
  EXPECT_EQ(ddph_session_flush(s.s), nullptr);
}

// The hook refuses save_state and load_state while a bucket is in flight, so
// these pass only if the session waits for every done first.
TEST(PipelinedSession, CheckpointsAndCloseWaitForTheDones) {
  const std::string config = yaml("pipelined", "{delay_ms: 30}");
  std::string blob;
  {
    Session s(config);
    Recorder rec(4);
    auto buckets = submit(s.s, rec, 4);
    ddph_error_t* e = ddph_session_save_state(s.s, &append, &blob);
    ASSERT_EQ(e, nullptr) << ddph_error_message(e);
    EXPECT_EQ(rec.calls.load(), 4);
    Recorder more(3);
    auto others = submit(s.s, more, 3);
    e = ddph_session_load_state(s.s, blob.data(), blob.size());
    ASSERT_EQ(e, nullptr) << ddph_error_message(e);
    EXPECT_EQ(more.calls.load(), 3);
    Recorder last(3);
    auto at_close = submit(s.s, last, 3);
    ddph_session_close(s.s);  // waits for these three dones, then destroys the hook
    s.s = nullptr;
    EXPECT_EQ(last.calls.load(), 3);
    for (const auto& b : at_close) EXPECT_TRUE(b->completed());
  }
  // The hook's record holds the 4 buckets completed when it was saved.
  const uint64_t four = 4;
  EXPECT_NE(blob.find(std::string(reinterpret_cast<const char*>(&four), sizeof four)),
            std::string::npos);
}

// A pipelined bucket's done must not wait for the buckets it is part of.
TEST(PipelinedSession, FlushFromAPipelinedDoneIsRefusedNotADeadlock) {
  Session s(yaml("pipelined", "{delay_ms: 5}"));
  Recorder rec(3);
  rec.flush_from_done = s.s;  // before submit, which the dones follow
  auto buckets = submit(s.s, rec, 3);
  while (rec.calls.load() < 3) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::lock_guard<std::mutex> lock(rec.mu);
  EXPECT_EQ(rec.flush_codes, std::vector<ddph_code_t>(3, DDPH_INVALID_ARGUMENT));
}

// ABI 1.8: the session checks a bucket's params once, at submit, and says
// so to the hook, which then does not check them again; what the host
// itself writes in params_checked is not believed.
TEST(PipelinedSession, TheHookIsToldTheParamsWereCheckedAndTheHostIsNotBelieved) {
  Session s(yaml("serial", "{delay_ms: 0}"));
  Recorder rec(1);
  Bucket ok(0);
  ASSERT_EQ(ok.b.params_checked, 0);
  ASSERT_EQ(ddph_session_submit(s.s, &ok.b, &Recorder::done, &rec.tokens[0]), nullptr);
  ASSERT_EQ(ddph_session_flush(s.s), nullptr);
  ASSERT_TRUE(ok.completed());
  EXPECT_TRUE(ok.hook_saw_params_checked());

  Bucket lying(1);
  int64_t view[1] = {4};
  ddph_param_t param{};
  param.struct_size = sizeof param;
  param.offset = kNumel - 2;  // 4 elements from 14 overrun the 16 of the buffer
  param.ndim = 1;
  param.shape = view;
  lying.b.num_params = 1;
  lying.b.params = &param;
  lying.b.params_checked = 1;
  ddph_error_t* e = ddph_session_submit(s.s, &lying.b, &Recorder::done, &rec.tokens[0]);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(ddph_error_code(e), DDPH_INVALID_ARGUMENT);
  EXPECT_NE(std::string(ddph_error_message(e)).find("lies outside the bucket"), std::string::npos)
      << ddph_error_message(e);
  ddph_error_free(e);
}
