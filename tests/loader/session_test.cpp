// Sessions through libddph.so's C API, on the fixture hooks and the fake
// communicator (world of one), so no network is needed.
#include <ddph/ddph.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include "test_paths.h"
#include "tests/loader/done_recorder.h"

using ddph_test::fixture_dir;

namespace {

std::string yaml(const std::string& hook, const std::string& comm_options = "{}",
                 const std::string& extra = "") {
  return "plugin_path: [" + fixture_dir("good") +
         "]\ncomm: {backend: fake, options: " + comm_options + "}\nhook: " + hook + "\n" + extra;
}

ddph_session_options_t options_for(const std::string& text) {
  ddph_session_options_t o{};
  o.struct_size = sizeof o;
  o.yaml_text = text.c_str();
  o.rank = -1;
  o.world_size = -1;
  return o;
}

// Owns a session; asserts it opened.
struct Session {
  ddph_session_t* s = nullptr;
  explicit Session(const std::string& text) {
    ddph_session_options_t o = options_for(text);
    ddph_error_t* e = ddph_session_open(&o, &s);
    EXPECT_EQ(e, nullptr) << ddph_error_message(e);
    ddph_error_free(e);
  }
  ~Session() { ddph_session_close(s); }
};

// A float32 bucket over its own storage.
struct Bucket {
  std::vector<float> data;
  int64_t shape[1];
  ddph_bucket_t b{};
  Bucket(size_t n, float value, uint64_t index = 0, uint64_t step = 0, bool last = false)
      : data(n, value) {
    shape[0] = int64_t(n);
    b.struct_size = sizeof b;
    b.index = index;
    b.step = step;
    b.is_last = last;
    b.buffer.data = data.data();
    b.buffer.device = {kDLCPU, 0};
    b.buffer.ndim = 1;
    b.buffer.dtype = {kDLFloat, 32, 1};
    b.buffer.shape = shape;
  }
};

#define EXPECT_ERROR(expr, code, part)                                           \
  do {                                                                           \
    ddph_error_t* e_ = (expr);                                                   \
    EXPECT_EQ(ddph_error_code(e_), code) << ddph_error_message(e_);              \
    EXPECT_NE(std::string(ddph_error_message(e_)).find(part), std::string::npos) \
        << ddph_error_message(e_);                                               \
    ddph_error_free(e_);                                                         \
  } while (0)

}  // namespace

TEST(Session, RunsBucketsInSubmissionOrderAndCallsDoneOnce) {
  Session s(yaml("{family: fixture_sum, name: sum, options: {add: 1}}"));
  ASSERT_NE(s.s, nullptr);
  const int n = 200;
  Recorder rec(n);
  std::vector<std::unique_ptr<Bucket>> buckets;
  for (int i = 0; i < n; ++i) {
    buckets.push_back(std::make_unique<Bucket>(16, float(i), i % 4, i / 4, i % 4 == 3));
    ASSERT_EQ(ddph_session_submit(s.s, &buckets.back()->b, &Recorder::done, &rec.tokens[i]),
              nullptr);
  }
  EXPECT_EQ(ddph_session_flush(s.s), nullptr);
  ASSERT_EQ(rec.calls.load(), n);
  for (int i = 0; i < n; ++i) {
    EXPECT_EQ(rec.order[i], i);
    EXPECT_EQ(rec.codes[i], DDPH_OK);
    EXPECT_FLOAT_EQ(buckets[i]->data[0], float(i) + 1);  // the fake comm copies; sum adds 1
  }
  ddph_stats_t st{};
  st.struct_size = sizeof st;
  ASSERT_EQ(ddph_session_stats(s.s, &st), nullptr);
  EXPECT_EQ(st.buckets, uint64_t(n));
  EXPECT_EQ(st.steps, uint64_t(n / 4));
  EXPECT_EQ(st.bytes_in, uint64_t(n) * 16 * 4);
  EXPECT_EQ(st.bytes_out, uint64_t(n) * 16 * 4);
  EXPECT_EQ(st.wire_bytes, uint64_t(n) * 16 * 4);
}

// Plugins built against the frozen 1.0 header (tests/abi/v1_0), as an old
// binary would be: a 1.0 hook family and a 1.0 communicator (whose table
// ends before alltoallv) open and run in today's loader, and a hook that
// needs alltoallv falls back to send/recv on that communicator.
TEST(Session, PluginsBuiltForAbi1_0StillRun) {
  const std::string dir = fixture_dir("v1_0");
  for (const char* hook : {"{family: fixture_sum, name: sum, options: {add: 2}}",
                           "{family: quantization, name: per_channel, options: {protocol: "
                           "reduce_scatter}}"}) {
    Session s("plugin_path: [" + dir + "]\ncomm: {backend: fake}\nhook: " + std::string(hook) +
              "\n");
    ASSERT_NE(s.s, nullptr) << hook;
    ddph_comm_t* comm = ddph_session_comm(s.s);
    ASSERT_NE(comm, nullptr);
    EXPECT_EQ(comm->struct_size, size_t(DDPH_COMM_SIZE_V1_0)) << "not the 1.0 build of comm_fake";
    Bucket b(300, 1.5f, 0, 0, true);
    Recorder rec(1);
    ASSERT_EQ(ddph_session_submit(s.s, &b.b, &Recorder::done, &rec.tokens[0]), nullptr);
    ddph_error_free(ddph_session_flush(s.s));
    ASSERT_EQ(rec.codes.size(), 1u);
    EXPECT_EQ(rec.codes[0], DDPH_OK) << rec.messages[0];
    // World of one: sum adds 2; the 8-bit mean of a constant is exact.
    const float want = std::string(hook).find("fixture_sum") != std::string::npos ? 3.5f : 1.5f;
    for (float v : b.data) ASSERT_EQ(v, want) << hook;
  }
}

TEST(Session, SubmitCopiesTheBucketStruct) {
  Session s(yaml("{family: fixture_sum, name: sum, options: {add: 2}}"));
  Recorder rec(1);
  std::vector<float> data(8, 1.0f);
  {
    Bucket temp(8, 0);
    temp.b.buffer.data = data.data();
    ASSERT_EQ(ddph_session_submit(s.s, &temp.b, &Recorder::done, &rec.tokens[0]), nullptr);
    temp.shape[0] = 999999;  // the caller may scribble on its structs once submit returns
    temp.b.buffer.ndim = 7;
  }
  EXPECT_EQ(ddph_session_flush(s.s), nullptr);
  EXPECT_FLOAT_EQ(data[7], 3.0f);
}

TEST(Session, WrapperComposes) {
  Session s(
      yaml("{family: fixture_sum, name: scale, options: {factor: 3}, "
           "wrap: {family: fixture_sum, name: sum, options: {add: 1}}}"));
  Bucket b(4, 2.0f);
  Recorder rec(1);
  ASSERT_EQ(ddph_session_submit(s.s, &b.b, &Recorder::done, &rec.tokens[0]), nullptr);
  EXPECT_EQ(ddph_session_flush(s.s), nullptr);
  EXPECT_FLOAT_EQ(b.data[0], 7.0f);  // 2 * 3, then + 1
}

TEST(Session, RulesSelectByBucketSize) {
  Session s(yaml("{family: fixture_sum, name: sum, options: {add: 100}}", "{}",
                 "rules:\n"
                 "  - when: {max_bytes: 64}\n"
                 "    hook: {family: fixture_sum, name: sum, options: {add: 1}}\n"
                 "  - when: {max_bytes: 256}\n"
                 "    hook: {family: fixture_sum, name: sum, options: {add: 10}}\n"));
  Bucket small(16, 0), exact(64, 0), big(65, 0);  // 64 B, 256 B, 260 B
  Recorder rec(3);
  ASSERT_EQ(ddph_session_submit(s.s, &small.b, &Recorder::done, &rec.tokens[0]), nullptr);
  ASSERT_EQ(ddph_session_submit(s.s, &exact.b, &Recorder::done, &rec.tokens[1]), nullptr);
  ASSERT_EQ(ddph_session_submit(s.s, &big.b, &Recorder::done, &rec.tokens[2]), nullptr);
  EXPECT_EQ(ddph_session_flush(s.s), nullptr);
  EXPECT_FLOAT_EQ(small.data[0], 1.0f);
  EXPECT_FLOAT_EQ(exact.data[0], 10.0f);
  EXPECT_FLOAT_EQ(big.data[0], 100.0f);
}

TEST(Session, SubmitMisuseIsRejectedWithoutCallingDone) {
  Session s(yaml("{family: fixture_sum, name: sum}"));
  Recorder rec(1);
  Bucket b(4, 0);
  EXPECT_ERROR(ddph_session_submit(nullptr, &b.b, &Recorder::done, &rec.tokens[0]),
               DDPH_INVALID_ARGUMENT, "session is NULL");
  EXPECT_ERROR(ddph_session_submit(s.s, nullptr, &Recorder::done, &rec.tokens[0]),
               DDPH_INVALID_ARGUMENT, "bucket is NULL");
  EXPECT_ERROR(ddph_session_submit(s.s, &b.b, nullptr, nullptr), DDPH_INVALID_ARGUMENT,
               "done is NULL");
  Bucket small_struct(4, 0);
  small_struct.b.struct_size = 8;
  EXPECT_ERROR(ddph_session_submit(s.s, &small_struct.b, &Recorder::done, &rec.tokens[0]),
               DDPH_INVALID_ARGUMENT, "bucket.struct_size");
  Bucket two_d(4, 0);
  two_d.b.buffer.ndim = 2;
  EXPECT_ERROR(ddph_session_submit(s.s, &two_d.b, &Recorder::done, &rec.tokens[0]),
               DDPH_INVALID_ARGUMENT, "bucket.buffer.ndim");
  Bucket no_data(4, 0);
  no_data.b.buffer.data = nullptr;
  EXPECT_ERROR(ddph_session_submit(s.s, &no_data.b, &Recorder::done, &rec.tokens[0]),
               DDPH_INVALID_ARGUMENT, "bucket.buffer.data");
  EXPECT_EQ(ddph_session_flush(s.s), nullptr);
  EXPECT_EQ(rec.calls.load(), 0);
}

TEST(Session, OtherMisuse) {
  EXPECT_ERROR(ddph_session_open(nullptr, nullptr), DDPH_INVALID_ARGUMENT, "out is NULL");
  ddph_session_t* s = reinterpret_cast<ddph_session_t*>(1);
  EXPECT_ERROR(ddph_session_open(nullptr, &s), DDPH_INVALID_ARGUMENT, "opts is NULL");
  EXPECT_EQ(s, nullptr);
  ddph_session_options_t o{};
  o.struct_size = 8;
  EXPECT_ERROR(ddph_session_open(&o, &s), DDPH_INVALID_ARGUMENT,
               "ddph_session_options.struct_size");
  o = options_for("hook: {}");
  o.yaml_path = "/x.yaml";
  EXPECT_ERROR(ddph_session_open(&o, &s), DDPH_INVALID_ARGUMENT, "exactly one of yaml_path");
  EXPECT_ERROR(ddph_session_flush(nullptr), DDPH_INVALID_ARGUMENT, "session is NULL");
  EXPECT_ERROR(ddph_session_stats(nullptr, nullptr), DDPH_INVALID_ARGUMENT, "session is NULL");
  EXPECT_EQ(ddph_session_comm(nullptr), nullptr);
  ddph_session_close(nullptr);
  Session good(yaml("{family: fixture_sum, name: sum}"));
  EXPECT_ERROR(ddph_session_stats(good.s, nullptr), DDPH_INVALID_ARGUMENT, "out is NULL");
  ddph_stats_t st{};
  st.struct_size = 4;
  EXPECT_ERROR(ddph_session_stats(good.s, &st), DDPH_INVALID_ARGUMENT, "struct_size");
  EXPECT_ERROR(ddph_session_save_state(good.s, nullptr, nullptr), DDPH_INVALID_ARGUMENT,
               "write is NULL");
  ASSERT_NE(ddph_session_comm(good.s), nullptr);
  EXPECT_EQ(ddph_session_comm(good.s)->size(ddph_session_comm(good.s)->ctx), 1);
}

TEST(Session, BadConfigFailsOpenWithEveryProblem) {
  const std::string text = yaml("{family: fixture_sum, name: sum, options: {level: 9, nope: 1}}");
  ddph_session_options_t o = options_for(text);
  ddph_session_t* s = nullptr;
  ddph_error_t* e = ddph_session_open(&o, &s);
  EXPECT_EQ(s, nullptr);
  EXPECT_EQ(ddph_error_code(e), DDPH_INVALID_ARGUMENT);
  std::string m = ddph_error_message(e);
  EXPECT_NE(m.find("<yaml text>:3:"), std::string::npos) << m;
  EXPECT_NE(m.find("hook.options.level"), std::string::npos) << m;
  EXPECT_NE(m.find("hook.options.nope"), std::string::npos) << m;
  ddph_error_free(e);
}

TEST(Session, RankAndWorldResolution) {
  // The fake comm refuses anything but a world of one: a bad world reaches it
  // only through the resolution order under test.
  {
    ddph_test::ScopedEnv env("DDPH_WORLD_SIZE", "2");
    const std::string text = yaml("{family: fixture_sum, name: sum}");
    ddph_session_options_t o = options_for(text);
    ddph_session_t* s = nullptr;
    EXPECT_ERROR(ddph_session_open(&o, &s), DDPH_INVALID_ARGUMENT, "world_size must be 1");
    o.world_size = 1;  // session options win over the environment
    ddph_error_t* e = ddph_session_open(&o, &s);
    EXPECT_EQ(e, nullptr) << ddph_error_message(e);
    ddph_session_close(s);
  }
  {
    ddph_test::ScopedEnv env("WORLD_SIZE", "3");
    ddph_test::ScopedEnv env2("DDPH_WORLD_SIZE", "1");  // DDPH_ beats the generic name
    Session s(yaml("{family: fixture_sum, name: sum}"));
    EXPECT_NE(s.s, nullptr);
  }
  {
    ddph_test::ScopedEnv env("RANK", "5");
    const std::string text = yaml("{family: fixture_sum, name: sum}");
    ddph_session_options_t o = options_for(text);
    ddph_session_t* s = nullptr;
    EXPECT_ERROR(ddph_session_open(&o, &s), DDPH_INVALID_ARGUMENT, "rank 5 is not below");
  }
}

TEST(Session, FlushReturnsTheFirstErrorSinceTheLastFlush) {
  Session s(yaml("{family: fixture_sum, name: sum, options: {fail_step: 1}}"));
  Recorder rec(4);
  Bucket b0(4, 0, 0, 0), b1(4, 0, 0, 1), b2(4, 0, 0, 1), b3(4, 0, 0, 2);
  ASSERT_EQ(ddph_session_submit(s.s, &b0.b, &Recorder::done, &rec.tokens[0]), nullptr);
  ASSERT_EQ(ddph_session_submit(s.s, &b1.b, &Recorder::done, &rec.tokens[1]), nullptr);
  ASSERT_EQ(ddph_session_submit(s.s, &b2.b, &Recorder::done, &rec.tokens[2]), nullptr);
  ASSERT_EQ(ddph_session_submit(s.s, &b3.b, &Recorder::done, &rec.tokens[3]), nullptr);
  EXPECT_ERROR(ddph_session_flush(s.s), DDPH_INVALID_ARGUMENT, "refusing step");
  ASSERT_EQ(rec.calls.load(), 4);
  EXPECT_EQ(rec.codes[0], DDPH_OK);
  EXPECT_EQ(rec.codes[1], DDPH_INVALID_ARGUMENT);  // each done got its own error
  EXPECT_EQ(rec.codes[2], DDPH_INVALID_ARGUMENT);
  EXPECT_EQ(rec.codes[3], DDPH_OK);             // not a comm failure: the session goes on
  EXPECT_EQ(ddph_session_flush(s.s), nullptr);  // reset by the last flush
}

TEST(Session, CommFailureBreaksTheSession) {
  Session s(yaml("{family: fixture_sum, name: sum}", "{fail_after: 2}"));
  const int n = 5;
  Recorder rec(n);
  std::vector<std::unique_ptr<Bucket>> buckets;
  for (int i = 0; i < n; ++i) {
    buckets.push_back(std::make_unique<Bucket>(4, 0));
    ASSERT_EQ(ddph_session_submit(s.s, &buckets.back()->b, &Recorder::done, &rec.tokens[i]),
              nullptr);
  }
  EXPECT_ERROR(ddph_session_flush(s.s), DDPH_COMM_FAILURE, "fail_after reached");
  ASSERT_EQ(rec.calls.load(), n);
  EXPECT_EQ(rec.codes[0], DDPH_OK);
  EXPECT_EQ(rec.codes[1], DDPH_OK);
  EXPECT_EQ(rec.codes[2], DDPH_COMM_FAILURE);
  for (int i = 3; i < n; ++i) {
    EXPECT_EQ(rec.codes[i], DDPH_COMM_FAILURE);
    EXPECT_NE(rec.messages[i].find("session is broken since: DDPH_COMM_FAILURE: fake: peer lost"),
              std::string::npos)
        << rec.messages[i];
  }
  // Later submissions are accepted and complete at once with the same error.
  Recorder later(1);
  Bucket b(4, 0);
  ASSERT_EQ(ddph_session_submit(s.s, &b.b, &Recorder::done, &later.tokens[0]), nullptr);
  EXPECT_ERROR(ddph_session_flush(s.s), DDPH_COMM_FAILURE, "session is broken since");
  EXPECT_EQ(later.calls.load(), 1);
}

namespace {
void append(void* sink, const void* bytes, size_t n) {
  static_cast<std::string*>(sink)->append(static_cast<const char*>(bytes), n);
}
}  // namespace

TEST(Session, SaveAndLoadStateRoundTrip) {
  const std::string config = yaml(
      "{family: fixture_sum, name: scale, "
      "wrap: {family: fixture_sum, name: sum}}");
  std::string blob;
  {
    Session s(config);
    Recorder rec(3);
    Bucket b(4, 1);
    for (int i = 0; i < 3; ++i)
      ASSERT_EQ(ddph_session_submit(s.s, &b.b, &Recorder::done, &rec.tokens[i]), nullptr);
    ASSERT_EQ(ddph_session_save_state(s.s, &append, &blob), nullptr);  // waits for the 3
  }
  ASSERT_GT(blob.size(), 8u);
  EXPECT_EQ(blob.compare(0, 8, "DDPHSTAT"), 0);
  EXPECT_NE(blob.find("fixture_sum"), std::string::npos);
  Session restored(config);
  ASSERT_EQ(ddph_session_load_state(restored.s, blob.data(), blob.size()), nullptr);
  std::string again;
  ASSERT_EQ(ddph_session_save_state(restored.s, &append, &again), nullptr);
  EXPECT_EQ(again, blob);  // the counter of 3 buckets came back

  std::string corrupt = blob;
  corrupt[1] = 'X';
  EXPECT_ERROR(ddph_session_load_state(restored.s, corrupt.data(), corrupt.size()),
               DDPH_INVALID_ARGUMENT, "magic");
  EXPECT_ERROR(ddph_session_load_state(restored.s, blob.data(), blob.size() - 3),
               DDPH_INVALID_ARGUMENT, "truncated");
  EXPECT_ERROR(ddph_session_load_state(restored.s, nullptr, 4), DDPH_INVALID_ARGUMENT,
               "bytes is NULL");
  // A blob from a session with a different hook line-up.
  Session other(
      yaml("{family: fixture_sum, name: sum}", "{}",
           "rules:\n  - when: {max_bytes: 4}\n    hook: {family: fixture_sum, name: sum}\n"));
  EXPECT_ERROR(ddph_session_load_state(other.s, blob.data(), blob.size()), DDPH_INVALID_ARGUMENT,
               "state blob holds 1 hook states, but this session has more");
}

TEST(Session, YamlPathAndMissingFile) {
  std::string path =
      ddph_test::write_temp_file("session.yaml", yaml("{family: fixture_sum, name: sum}"));
  ddph_session_options_t o{};
  o.struct_size = sizeof o;
  o.rank = o.world_size = -1;
  o.yaml_path = path.c_str();
  ddph_session_t* s = nullptr;
  ddph_error_t* e = ddph_session_open(&o, &s);
  EXPECT_EQ(e, nullptr) << ddph_error_message(e);
  ddph_session_close(s);
  o.yaml_path = "/nonexistent/job.yaml";
  EXPECT_ERROR(ddph_session_open(&o, &s), DDPH_NOT_FOUND, "/nonexistent/job.yaml");
}

TEST(Session, HostCommunicator) {
  // Borrow the fake comm of one session as the host's communicator of another.
  Session provider(yaml("{family: fixture_sum, name: sum}"));
  std::string text = "plugin_path: [" + fixture_dir("good") +
                     "]\ncomm: {backend: host}\nhook: {family: fixture_sum, name: sum}\n";
  ddph_session_options_t o = options_for(text);
  ddph_session_t* s = nullptr;
  EXPECT_ERROR(ddph_session_open(&o, &s), DDPH_INVALID_ARGUMENT,
               "ddph_session_options.comm is NULL");
  o.comm = ddph_session_comm(provider.s);
  ddph_error_t* e = ddph_session_open(&o, &s);
  ASSERT_EQ(e, nullptr) << ddph_error_message(e);
  EXPECT_EQ(ddph_session_comm(s), o.comm);
  ddph_session_close(s);  // must not destroy the borrowed comm
  Bucket b(4, 1);
  Recorder rec(1);
  ASSERT_EQ(ddph_session_submit(provider.s, &b.b, &Recorder::done, &rec.tokens[0]), nullptr);
  EXPECT_EQ(ddph_session_flush(provider.s), nullptr);
}

namespace {
struct FlushFromDone {
  ddph_session_t* s;
  ddph_code_t code = DDPH_OK;
  static void done(void* user, ddph_error_t* e) {
    ddph_error_free(e);
    auto* self = static_cast<FlushFromDone*>(user);
    ddph_error_t* f = ddph_session_flush(self->s);
    self->code = ddph_error_code(f);
    ddph_error_free(f);
  }
};
}  // namespace

// The same for close: it would join the worker from the worker. It is
// refused (with an error line), and the session goes on.
struct CloseFromDone {
  ddph_session_t* s;
  bool returned = false;
  static void done(void* user, ddph_error_t* e) {
    ddph_error_free(e);
    auto* self = static_cast<CloseFromDone*>(user);
    ddph_session_close(self->s);
    self->returned = true;
  }
};

TEST(Session, CloseFromADoneCallbackIsRefusedNotADeadlock) {
  Session s(yaml("{family: fixture_sum, name: sum}"));
  CloseFromDone probe{s.s};
  Bucket b(4, 1);
  ASSERT_EQ(ddph_session_submit(s.s, &b.b, &CloseFromDone::done, &probe), nullptr);
  EXPECT_EQ(ddph_session_flush(s.s), nullptr);
  EXPECT_TRUE(probe.returned);
  Bucket again(4, 1, 0, 1);
  ddph_done_fn ignore = [](void*, ddph_error_t* e) { ddph_error_free(e); };
  EXPECT_EQ(ddph_session_submit(s.s, &again.b, ignore, nullptr), nullptr);
  EXPECT_EQ(ddph_session_flush(s.s), nullptr);  // still open: the test's Session closes it
}

TEST(Session, FlushFromADoneCallbackIsMisuseNotADeadlock) {
  Session s(yaml("{family: fixture_sum, name: sum}"));
  FlushFromDone probe{s.s};
  Bucket b(4, 1);
  ASSERT_EQ(ddph_session_submit(s.s, &b.b, &FlushFromDone::done, &probe), nullptr);
  EXPECT_EQ(ddph_session_flush(s.s), nullptr);
  EXPECT_EQ(probe.code, DDPH_INVALID_ARGUMENT);
}

namespace {

// A host's device allocator (ABI 1.3) that records its calls. It hands out
// host memory, which the fixtures never touch: the test is that the
// session passes the table to its communicator and to every hook, and
// that what they take comes back.
struct RecordingAllocator {
  ddph_device_allocator_t table{};
  std::mutex mu;
  int allocs = 0, frees = 0, on_bucket_stream = 0, wrong_device = 0;
  bool refuse_bucket_stream = false;
  static constexpr uintptr_t kBucketStream = 0x5eed;

  RecordingAllocator() {
    table.struct_size = sizeof table;
    table.ctx = this;
    table.alloc = &alloc;
    table.free = &release;
  }
  static void* alloc(void* ctx, size_t bytes, DLDevice device, void* stream) {
    auto* a = static_cast<RecordingAllocator*>(ctx);
    std::lock_guard<std::mutex> lock(a->mu);
    const bool bucket = reinterpret_cast<uintptr_t>(stream) == kBucketStream;
    if (bucket && a->refuse_bucket_stream) return nullptr;
    a->allocs++;
    a->on_bucket_stream += bucket;
    a->wrong_device += device.device_type != kDLCUDA || device.device_id != 0;
    return std::malloc(bytes);
  }
  static void release(void* ctx, void* p, DLDevice, void*) {
    auto* a = static_cast<RecordingAllocator*>(ctx);
    std::lock_guard<std::mutex> lock(a->mu);
    a->frees++;
    std::free(p);
  }
};

ddph_code_t run_three_buckets(ddph_session_t* s, std::string* message) {
  for (uint64_t step = 0; step < 3; ++step) {
    Bucket b(8, 1.0f, 0, step, true);
    b.b.stream = reinterpret_cast<void*>(RecordingAllocator::kBucketStream);
    ddph_error_t* e = ddph_session_submit(
        s, &b.b, [](void*, ddph_error_t* e) { ddph_error_free(e); }, nullptr);
    if (e == nullptr) e = ddph_session_flush(s);
    const ddph_code_t code = ddph_error_code(e);
    *message = ddph_error_message(e);
    ddph_error_free(e);
    if (code != DDPH_OK) return code;
  }
  return DDPH_OK;
}

const std::string kWrappedSum =
    "{family: fixture_sum, name: scale, options: {factor: 2}, wrap: {family: fixture_sum, name: "
    "sum}}";

// ddph_session_open on kWrappedSum with `allocator` in options of
// `struct_size` bytes.
ddph_error_t* open_with(const RecordingAllocator& allocator, ddph_session_t** s,
                        size_t struct_size = sizeof(ddph_session_options_t)) {
  static const std::string text = yaml(kWrappedSum);
  ddph_session_options_t o = options_for(text);
  o.struct_size = struct_size;
  o.device_allocator = &allocator.table;
  *s = nullptr;
  return ddph_session_open(&o, s);
}

// Opens, runs three buckets (their code, with the message in *message),
// closes.
ddph_code_t three_buckets_with(const RecordingAllocator& allocator, std::string* message,
                               size_t struct_size = sizeof(ddph_session_options_t)) {
  ddph_session_t* s = nullptr;
  ddph_error_t* e = open_with(allocator, &s, struct_size);
  EXPECT_EQ(e, nullptr) << ddph_error_message(e);
  ddph_error_free(e);
  if (s == nullptr) return DDPH_INTERNAL;
  const ddph_code_t code = run_three_buckets(s, message);
  ddph_session_close(s);
  return code;
}

TEST(SessionDeviceAllocator, TheCommunicatorAndTheHooksGetTheHostsAllocator) {
  RecordingAllocator a;
  std::string message;
  EXPECT_EQ(three_buckets_with(a, &message), DDPH_OK) << message;
  // Per bucket: the sum hook's own block and the one of the allreduce it
  // asks of the communicator, both on the bucket's stream.
  EXPECT_EQ(a.on_bucket_stream, 6);
  EXPECT_GE(a.allocs, 6);
  EXPECT_EQ(a.frees, a.allocs);
  EXPECT_EQ(a.wrong_device, 0);
}

TEST(SessionDeviceAllocator, OlderOptionsAreNotReadPastTheirSize) {
  // A 1.0 host's struct ends before device_allocator: what lies there
  // (here a valid table) must not be read.
  RecordingAllocator a;
  std::string message;
  EXPECT_EQ(three_buckets_with(a, &message, DDPH_SESSION_OPTIONS_SIZE_V1_0), DDPH_OK) << message;
  EXPECT_EQ(a.allocs, 0);
}

TEST(SessionDeviceAllocator, AMalformedTableIsRefusedAndANullBlockFailsTheBucket) {
  ddph_session_t* s = nullptr;
  {
    RecordingAllocator a;
    a.table.struct_size = 3;
    EXPECT_ERROR(open_with(a, &s), DDPH_INVALID_ARGUMENT, "device_allocator->struct_size is 3");
    EXPECT_EQ(s, nullptr);
  }
  {
    RecordingAllocator a;
    a.table.free = nullptr;
    EXPECT_ERROR(open_with(a, &s), DDPH_INVALID_ARGUMENT, "device_allocator has no free function");
    EXPECT_EQ(s, nullptr);
  }
  {
    RecordingAllocator a;
    a.refuse_bucket_stream = true;
    std::string message;
    EXPECT_EQ(three_buckets_with(a, &message), DDPH_OUT_OF_MEMORY);
    EXPECT_NE(message.find("device allocator gave NULL"), std::string::npos) << message;
    EXPECT_EQ(a.frees, a.allocs);
  }
}

}  // namespace
