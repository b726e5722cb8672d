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
