// ddph_session_open through libddph.so on configs that used to crash the
// host or silently swap a built-in family: a node that contains itself, a
// job folder's own comm_gloo, a family in two folders; and jobs a hook's
// check() refuses.
#include <ddph/ddph.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <vector>

#include "option_check_jobs.h"
#include "test_paths.h"

using ddph_test::fixture_dir;

namespace {

const std::string kBuiltinGloo = std::string(DDPH_PLUGIN_DIR) + "/libddph_comm_gloo.so";
const std::string kFakeGloo = fixture_dir("fake_gloo") + "/libddph_comm_gloo.so";

struct Opened {
  ddph_session_t* session = nullptr;
  ddph_code_t code = DDPH_OK;
  std::string message;
};

Opened open_text(const std::string& text) {
  ddph_session_options_t o{};
  o.struct_size = sizeof o;
  o.yaml_text = text.c_str();
  o.rank = -1;
  o.world_size = -1;
  Opened r;
  ddph_error_t* e = ddph_session_open(&o, &r.session);
  r.code = ddph_error_code(e);
  r.message = ddph_error_message(e);
  ddph_error_free(e);
  return r;
}

// Runs one float32 bucket of `value`s; returns the values after the hook.
std::vector<float> run_bucket(ddph_session_t* s, float value) {
  std::vector<float> data(8, value);
  int64_t shape[1] = {int64_t(data.size())};
  ddph_bucket_t b{};
  b.struct_size = sizeof b;
  b.is_last = true;
  b.buffer.data = data.data();
  b.buffer.device = {kDLCPU, 0};
  b.buffer.ndim = 1;
  b.buffer.dtype = {kDLFloat, 32, 1};
  b.buffer.shape = shape;
  ddph_code_t code = DDPH_INTERNAL;
  auto done = [](void* user, ddph_error_t* e) {
    *static_cast<ddph_code_t*>(user) = ddph_error_code(e);
    ddph_error_free(e);
  };
  EXPECT_EQ(ddph_session_submit(s, &b, done, &code), nullptr);
  ddph_error_free(ddph_session_flush(s));
  EXPECT_EQ(code, DDPH_OK);
  return data;
}

// The fixture family with a check, on the network-free communicator.
std::string fixture_job(const std::string& build, const std::string& options) {
  return "plugin_path: [" + fixture_dir(build) +
         "]\ncomm: {backend: fake}\nhook:\n  family: fixture_sum\n  name: sum\n  options:\n" +
         options;
}

#define EXPECT_HAS(text, part) \
  EXPECT_NE(std::string(text).find(part), std::string::npos) << "in: " << (text)

}  // namespace

// Issue 21: this killed the host (stack overflow in the option reader).
TEST(SessionConfig, ANodeThatContainsItselfIsAnErrorNotACrash) {
  Opened r = open_text("hook: &h {family: default, name: allreduce, options: {x: *h}}\n");
  EXPECT_EQ(r.session, nullptr);
  EXPECT_EQ(r.code, DDPH_INVALID_ARGUMENT);
  EXPECT_HAS(r.message, "<yaml text>:1:58: alias '*h' refers to the node anchored at line 1");
}

TEST(SessionConfig, TheAliasBombIsOneShortError) {
  Opened r = open_text(ddph_test::alias_bomb());
  EXPECT_EQ(r.session, nullptr);
  EXPECT_EQ(r.code, DDPH_INVALID_ARGUMENT);
  EXPECT_LT(r.message.size(), 400u) << r.message.substr(0, 2000);
  EXPECT_HAS(r.message, "100000 nodes");
}

// Issue 21: a comm_gloo in the job folder made every gradient 42, silently.
TEST(SessionConfig, AJobFoldersCommGlooIsRefusedWithoutReplaceBuiltin) {
  ASSERT_EQ(access(kBuiltinGloo.c_str(), R_OK), 0) << "the built-in comm_gloo is not built";
  const std::string job = "plugin_path: [" + fixture_dir("fake_gloo") + ", " + fixture_dir("good") +
                          "]\ncomm: {backend: gloo}\nhook: {family: fixture_sum, name: sum}\n";
  Opened refused = open_text(job);
  EXPECT_EQ(refused.session, nullptr);
  EXPECT_EQ(refused.code, DDPH_INVALID_ARGUMENT);
  EXPECT_HAS(refused.message,
             "<yaml text>:2:17: comm.backend: plugin family 'comm_gloo' is "
             "built in (" +
                 kBuiltinGloo + "), but " + kFakeGloo + " (from plugin_path) comes first");
  EXPECT_HAS(refused.message, "add `replace_builtin: [comm_gloo]`");

  testing::internal::CaptureStderr();
  Opened used = open_text(job + "replace_builtin: [comm_gloo]\n");
  const std::string log = testing::internal::GetCapturedStderr();
  ASSERT_NE(used.session, nullptr) << used.message;
  // The fake's allreduce writes 42: proof that the job's copy is the one running.
  for (float v : run_bucket(used.session, 1.5f)) EXPECT_EQ(v, 42.0f);
  ddph_session_close(used.session);
  // And the open said which copy it took.
  EXPECT_HAS(log,
             "ddph warn: plugin family 'comm_gloo' is in 2 folders of the search path: using " +
                 kFakeGloo + " (plugin_path), not " + kBuiltinGloo + " (built in)");
}

TEST(SessionConfig, ARelativePluginPathInTextIsRefused) {
  Opened r = open_text(
      "plugin_path: [good]\ncomm: {backend: fake}\n"
      "hook: {family: fixture_sum, name: sum}\n");
  EXPECT_EQ(r.session, nullptr);
  EXPECT_EQ(r.code, DDPH_INVALID_ARGUMENT);
  EXPECT_HAS(r.message,
             "<yaml text>:1:15: plugin_path[0]: 'good' is relative, but this config is "
             "text, with no file to be relative to");
}

// ABI 1.5 check(): options refused as a whole, before anything connects, at
// the YAML line of the key at fault; a plugin whose table predates 1.5 loads
// without being asked.
TEST(OptionCheck, SessionOpenRefusesEachJobBeforeConnecting) {
  for (const auto& job : ddph_test::refused_jobs()) {
    const auto start = std::chrono::steady_clock::now();
    Opened r = open_text(job.yaml);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_EQ(r.session, nullptr) << job.name;
    if (r.session != nullptr) ddph_session_close(r.session);
    EXPECT_TRUE(r.code == DDPH_INVALID_ARGUMENT || r.code == DDPH_UNSUPPORTED)
        << job.name << ": " << r.code << " " << r.message;
    const std::string at = "<yaml text>:" + std::to_string(job.line) + ":";
    EXPECT_NE(r.message.find(at), std::string::npos) << job.name << ": " << r.message;
    EXPECT_NE(r.message.find(std::string(job.key) + ": "), std::string::npos)
        << job.name << ": " << r.message;
    EXPECT_NE(r.message.find(job.says), std::string::npos) << job.name << ": " << r.message;
    // Connecting would wait for the second rank until the 20 s timeout:
    // half of it leaves room for a loaded machine.
    EXPECT_LT(seconds, 10.0) << job.name;
  }
}

TEST(OptionCheck, ABadOptionIsReportedAtItsKeysLine) {
  Opened r = open_text(fixture_job("check", "    mode: fast\n    level: 3\n"));
  EXPECT_EQ(r.session, nullptr);
  EXPECT_EQ(r.code, DDPH_INVALID_ARGUMENT) << r.message;
  EXPECT_NE(r.message.find("<yaml text>:8:5: hook.options.level: sum: level 3 "
                           "needs mode exact"),
            std::string::npos)
      << r.message;
}

TEST(OptionCheck, ARefusalNamingNoOptionIsReportedAtTheHooksName) {
  Opened r = open_text(fixture_job("check", "    add: 1.5\n    verbose: true\n"));
  EXPECT_EQ(r.session, nullptr);
  EXPECT_EQ(r.code, DDPH_UNSUPPORTED) << r.message;
  EXPECT_NE(r.message.find("<yaml text>:5:9: hook: sum: verbose cannot report"), std::string::npos)
      << r.message;
}

TEST(OptionCheck, OptionsTheCheckAcceptsOpen) {
  Opened r = open_text(fixture_job("check", "    mode: exact\n    level: 3\n"));
  EXPECT_EQ(r.code, DDPH_OK) << r.message;
  ASSERT_NE(r.session, nullptr);
  ddph_session_close(r.session);
}

// The same plugin source, but its table says 1.4 (no check): the check that
// lies past its end is not called, and the job opens.
TEST(OptionCheck, AHookTableOlderThan1_5LoadsUnchecked) {
  Opened r = open_text(fixture_job("check_v1_4", "    mode: fast\n    level: 3\n"));
  EXPECT_EQ(r.code, DDPH_OK) << r.message;
  ASSERT_NE(r.session, nullptr);
  ddph_session_close(r.session);
  // And a 1.0 binary, built against the frozen header, still opens too.
  r = open_text(fixture_job("v1_0", "    level: 3\n"));
  EXPECT_EQ(r.code, DDPH_OK) << r.message;
  if (r.session != nullptr) ddph_session_close(r.session);
}
