// The built `ddph` binary: plugins listing and validate exit codes.
#include <ddph/ddph.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <string>

#include "test_paths.h"

using ddph_test::fixture_dir;

namespace {

struct ToolRun {
  int status;
  std::string output;
};

ToolRun run(const std::string& args) {
  std::string cmd = std::string(DDPH_BIN_DIR) + "/ddph " + args + " 2>&1";
  ToolRun r{-1, ""};
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.output.append(buf, n);
  int raw = pclose(p);
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  return r;
}

std::string good_yaml() {
  return "plugin_path: [" + fixture_dir("good") +
         "]\ncomm: {backend: fake}\nhook: {family: fixture_sum, name: sum}\n";
}

}  // namespace

TEST(Tool, HelpAndUnknownCommand) {
  ToolRun help = run("--help");
  EXPECT_EQ(help.status, 0);
  EXPECT_NE(help.output.find("validate"), std::string::npos) << help.output;
  ToolRun bad = run("frobnicate");
  EXPECT_EQ(bad.status, 2);
  EXPECT_NE(bad.output.find("unknown command 'frobnicate'"), std::string::npos) << bad.output;
}

TEST(Tool, ValidateExitCodes) {
  std::string ok = ddph_test::write_temp_file("ok.yaml", good_yaml());
  std::string bad = ddph_test::write_temp_file(
      "bad.yaml", good_yaml() + "rules:\n  - when: {max_bytes: x}\n    hook: {family: f}\n");
  ToolRun r = run("validate " + ok);
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find(ok + ": ok"), std::string::npos) << r.output;

  r = run("validate " + ok + " " + bad);
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find(ok + ": ok"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(bad + ":5:"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("rules[0].when.max_bytes: expects an int"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("rules[0].hook.name: missing"), std::string::npos) << r.output;

  r = run("validate /nonexistent/job.yaml");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("cannot read"), std::string::npos) << r.output;

  EXPECT_EQ(run("validate").status, 2);
  EXPECT_EQ(run("validate --bogus x.yaml").status, 2);
}

TEST(Tool, PluginsShowTheAbiTheyWereBuiltFor) {
  ToolRun r = run("plugins --plugin-path " + fixture_dir("v1_0"));
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("fixture_sum 0.1-fixture (ABI 1.0) " + fixture_dir("v1_0")),
            std::string::npos)
      << r.output;
}

TEST(Tool, PluginsListsTheFixtureFamily) {
  ToolRun r = run("plugins --plugin-path " + fixture_dir("good"));
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("fixture_sum 0.1-fixture (ABI 1." + std::to_string(DDPH_ABI_MINOR) +
                          ") " + fixture_dir("good")),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("hook scale: scale the buffer, then run the inner hook [wrapper"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("level (int, default 1, range [0, 3]): an int with a range"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("mode (string, default fast, one of fast|exact)"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("comm backend fake"), std::string::npos) << r.output;
}

TEST(Tool, PluginsReportsBrokenPluginsAndKeepsGoing) {
  ToolRun r =
      run("plugins --plugin-path " + fixture_dir("abi2") + " --plugin-path " + fixture_dir("good"));
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("cannot load"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("fixture_sum 0.1-fixture"), std::string::npos) << r.output;
}

// The loader's fixture is also the plain-C example of a hook plugin: it must
// keep the whole contract (its argument checks: tests/support/c_plugin_checks.h),
// in its current build and in the one against the frozen 1.0 header.
TEST(Tool, TheFixturePluginPassesValidatePlugin) {
  for (const char* build : {"good", "v1_0"}) {
    ToolRun r =
        run("validate-plugin --timeout 8 " + fixture_dir(build) + "/libddph_fixture_sum.so");
    EXPECT_EQ(r.status, 0) << build << ":\n" << r.output;
    EXPECT_EQ(r.output.find("| FAIL"), std::string::npos) << build << ":\n" << r.output;
    for (const char* row : {"create_misuse     | sum   | PASS", "create_misuse     | scale | PASS",
                            "bucket_misuse     | sum   | PASS", "bucket_misuse     | scale | PASS"})
      EXPECT_NE(r.output.find(row), std::string::npos) << build << ": " << row << "\n" << r.output;
  }
}
