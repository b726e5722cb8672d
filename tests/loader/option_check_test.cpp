// ABI 1.5 check() through ddph_session_open: options refused as a whole,
// before anything connects, at the YAML line of the key at fault; and a
// plugin whose table predates 1.5 loads without being asked.
#include <ddph/ddph.h>
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "option_check_jobs.h"
#include "test_paths.h"

using ddph_test::fixture_dir;

namespace {

struct Opened {
  ddph_session_t* session = nullptr;
  ddph_code_t code = DDPH_OK;
  std::string message;
  double seconds = 0;
};

Opened open_text(const std::string& text) {
  ddph_session_options_t o{};
  o.struct_size = sizeof o;
  o.yaml_text = text.c_str();
  o.rank = -1;
  o.world_size = -1;
  Opened r;
  const auto start = std::chrono::steady_clock::now();
  ddph_error_t* e = ddph_session_open(&o, &r.session);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  r.code = ddph_error_code(e);
  r.message = ddph_error_message(e);
  ddph_error_free(e);
  return r;
}

// The fixture family with a check, on the network-free communicator.
std::string fixture_job(const std::string& build, const std::string& options) {
  return "plugin_path: [" + fixture_dir(build) +
         "]\ncomm: {backend: fake}\nhook:\n  family: fixture_sum\n  name: sum\n  options:\n" +
         options;
}

}  // namespace

TEST(OptionCheck, SessionOpenRefusesEachJobBeforeConnecting) {
  for (const auto& job : ddph_test::refused_jobs()) {
    Opened r = open_text(job.yaml);
    EXPECT_EQ(r.session, nullptr) << job.name;
    if (r.session != nullptr) ddph_session_close(r.session);
    EXPECT_TRUE(r.code == DDPH_INVALID_ARGUMENT || r.code == DDPH_UNSUPPORTED)
        << job.name << ": " << r.code << " " << r.message;
    const std::string at = "<yaml text>:" + std::to_string(job.line) + ":";
    EXPECT_NE(r.message.find(at), std::string::npos) << job.name << ": " << r.message;
    EXPECT_NE(r.message.find(std::string(job.key) + ": "), std::string::npos)
        << job.name << ": " << r.message;
    EXPECT_NE(r.message.find(job.says), std::string::npos) << job.name << ": " << r.message;
    // Connecting would wait for the second rank until the 20 s timeout.
    EXPECT_LT(r.seconds, 5.0) << job.name;
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
