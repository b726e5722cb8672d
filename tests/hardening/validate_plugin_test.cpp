// `ddph validate-plugin` on plugins built to break one rule each: the tool
// itself must survive, name the broken rule in the right row, and exit 1;
// the intact build of the same source must pass everything.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "tests/support/multiprocess.h"

namespace {

struct ToolRun {
  int exit_code = -1;  // -1: killed by a signal
  std::string out;
};

ToolRun validate(const std::string& lib, const char* extra = "", const char* timeout = "8") {
  const std::string cmd = std::string(DDPH_BIN_DIR) + "/ddph validate-plugin --timeout " + timeout +
                          " " + extra + " '" + lib + "' 2>&1";
  ToolRun r;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) r.out.append(buf, n);
  const int status = pclose(p);
  if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  return r;
}

std::string fixture(const std::string& c) {
  return std::string(DDPH_HARDENING_DIR) + "/" + c + "/libddph_hardening_" + c + ".so";
}

// The table row of check `check` (first column), or "" when there is none.
std::string row(const std::string& out, const std::string& check) {
  size_t pos = 0;
  while ((pos = out.find(check + " ", pos)) != std::string::npos) {
    if (pos == 0 || out[pos - 1] == '\n') {
      const size_t end = out.find('\n', pos);
      return out.substr(pos, end - pos);
    }
    ++pos;
  }
  return "";
}

bool has(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

TEST(ValidatePlugin, TheIntactFixturePassesEveryCheck) {
  ToolRun r = validate(fixture("good"));
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_FALSE(has(r.out, "| FAIL")) << r.out;
  for (const char* c :
       {"load", "exports", "abi_version", "file_name", "struct_sizes", "hook_table", "option_check",
        "create_destroy", "create_misuse", "run_bucket n=0", "run_bucket n=1", "run_bucket n=1000",
        "nonfinite", "bucket_misuse", "state_round_trip"})
    EXPECT_TRUE(has(row(r.out, c), "| PASS")) << c << ":\n" << r.out;
}

// ABI 1.5: a check() that refuses the hook's own defaults would refuse every
// job that leaves them alone.
TEST(ValidatePlugin, ACheckThatRefusesItsDefaultsIsAFailRow) {
  ToolRun r = validate(fixture("check_refuses_defaults"));
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_TRUE(has(row(r.out, "option_check"),
                  "| FAIL   | check() refused the default options: DDPH_INVALID_ARGUMENT"))
      << r.out;
  EXPECT_TRUE(has(row(r.out, "create_destroy"), "| PASS")) << r.out;
}

TEST(ValidatePlugin, ACrashInRunBucketIsAFailRowNamingTheSignal) {
  ToolRun r = validate(fixture("crash"));
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_TRUE(has(row(r.out, "run_bucket n=1000"),
                  "| FAIL   | crashed: SIGSEGV (Segmentation fault) while: run_bucket, step 0"))
      << r.out;
  EXPECT_TRUE(has(row(r.out, "hook_table"), "| PASS"))
      << "checks that never run a bucket still pass\n"
      << r.out;
  EXPECT_TRUE(has(r.out, "failed")) << "the summary line is printed after the crash\n" << r.out;
}

TEST(ValidatePlugin, ABucketNeverCompletedIsAFailRow) {
  ToolRun r = validate(fixture("never_done"));
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_TRUE(has(row(r.out, "run_bucket n=1"),
                  "| FAIL   | step 0: run_bucket accepted the bucket but "
                  "done was not called"))
      << r.out;
}

TEST(ValidatePlugin, ARunBucketThatNeverReturnsIsKilledAndReportedAsHung) {
  ToolRun r = validate(fixture("hang"), "", "2");
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_TRUE(
      has(row(r.out, "run_bucket n=1000"), "| FAIL   | hung after 2s while: run_bucket, step 0"))
      << r.out;
  EXPECT_TRUE(has(row(r.out, "bucket_misuse"), "| PASS")) << "the next checks still run\n" << r.out;
}

TEST(ValidatePlugin, DoneCalledTwiceIsAFailRow) {
  ToolRun r = validate(fixture("done_twice"));
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_TRUE(has(row(r.out, "run_bucket n=0"), "| FAIL   | step 0: done was called 2 times"))
      << r.out;
  EXPECT_TRUE(has(row(r.out, "bucket_misuse"), "| PASS")) << r.out;
}

TEST(ValidatePlugin, AnExtraExportedSymbolIsAFailRow) {
  ToolRun r = validate(fixture("extra_symbol"));
  EXPECT_EQ(r.exit_code, 1) << r.out;
  const std::string exports = row(r.out, "exports");
  EXPECT_TRUE(has(exports, "| FAIL")) << r.out;
  EXPECT_TRUE(has(exports, "hardening_helper_left_visible")) << r.out;
  EXPECT_TRUE(has(row(r.out, "run_bucket n=1000"), "| PASS")) << r.out;
}

TEST(ValidatePlugin, ALargerAbiMajorIsRefusedWithAMessage) {
  ToolRun r = validate(fixture("abi2"));
  EXPECT_EQ(r.exit_code, 1) << r.out;
  const std::string abi = row(r.out, "abi_version");
  EXPECT_TRUE(has(abi, "| FAIL   | built against ABI 2.")) << r.out;
  EXPECT_TRUE(has(abi, "refused")) << r.out;
  // Tables of another major cannot be read safely: nothing of them is run.
  EXPECT_TRUE(has(row(r.out, "run_bucket n=1000"), "| SKIP")) << r.out;
}

TEST(ValidatePlugin, ANewerAbiMinorLoads) {
  // tests/fixtures' plugin built claiming minor 99 (its other defects,
  // e.g. no NULL-state check, are not this test's business).
  ToolRun r = validate(std::string(DDPH_TEST_FIXTURE_DIR) + "/minor/libddph_fixture_minor.so");
  const std::string abi = row(r.out, "abi_version");
  EXPECT_TRUE(has(abi, "| PASS   | ABI 1.99 (newer minor than this ddph's")) << r.out;
  EXPECT_TRUE(has(row(r.out, "run_bucket n=1000"), "| PASS")) << r.out;
}

TEST(ValidatePlugin, AFileNotNamedForItsFamilyIsAFailRow) {
  const std::string dir = ddph_test::make_temp_dir("ddph-validate");
  const std::string copy = dir + "/my_plugin.so";
  {
    std::ifstream in(fixture("good"), std::ios::binary);
    std::ofstream out(copy, std::ios::binary);
    out << in.rdbuf();
  }
  ToolRun r = validate(copy);
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_TRUE(
      has(row(r.out, "file_name"), "only as libddph_hardening_good.so; this file is my_plugin.so"))
      << r.out;
  EXPECT_TRUE(has(row(r.out, "run_bucket n=1000"), "| PASS")) << "a file anywhere is validated\n"
                                                              << r.out;
  std::remove(copy.c_str());
  rmdir(dir.c_str());
}

TEST(ValidatePlugin, NotAnElfFileFailsToLoadWithoutCrashingTheTool) {
  ToolRun r = validate(std::string(DDPH_TEST_FIXTURE_DIR) + "/garbage/libddph_fixture_garbage.so");
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_TRUE(has(row(r.out, "load"), "| FAIL   | dlopen failed")) << r.out;
  EXPECT_TRUE(has(row(r.out, "exports"), "not an ELF file")) << r.out;
}

TEST(ValidatePlugin, JsonOutputCarriesTheSameVerdicts) {
  ToolRun r = validate(fixture("done_twice"), "--json");
  EXPECT_EQ(r.exit_code, 1) << r.out;
  // One compact shape, as every --json line (nlohmann/json, docs/cli.md).
  EXPECT_TRUE(has(r.out, "\"ok\":false")) << r.out;
  EXPECT_TRUE(has(r.out,
                  "{\"check\":\"run_bucket n=0\",\"hook\":\"avg\",\"result\":\"FAIL\","
                  "\"detail\":\"step 0: done was called 2 times for one bucket\"}"))
      << r.out;
}

TEST(ValidatePlugin, UsageErrorsExitTwo) {
  EXPECT_EQ(validate("", "--timeout 0").exit_code, 2);
  EXPECT_EQ(validate(fixture("good"), "--frobnicate").exit_code, 2);
}

}  // namespace
