// The built `ddph` binary: plugins listing and validate exit codes.
#include <ddph/ddph.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>

#include "option_check_jobs.h"
#include "test_paths.h"

using ddph_test::fixture_dir;

namespace {

struct ToolRun {
  int status;
  std::string output;
};

// Runs `ddph args` (after `env`, e.g. "X=1") through the shell.
ToolRun run(const std::string& args, const std::string& env = "") {
  std::string cmd = env + " " + std::string(DDPH_BIN_DIR) + "/ddph " + args + " 2>&1";
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

bool exists(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
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
  ToolRun r = run("validate --load-plugins " + ok);
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find(ok + ": ok"), std::string::npos) << r.output;

  // The fixture families come from plugin_path: without --load-plugins they
  // are not opened, and the exit status says so.
  r = run("validate " + ok);
  EXPECT_EQ(r.status, 3) << r.output;
  EXPECT_NE(r.output.find(ok + ":2:17: comm.backend: not checked: family 'comm_fake' comes from " +
                          fixture_dir("good") +
                          "/libddph_comm_fake.so (plugin_path); pass "
                          "--load-plugins"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find(ok + ":3:16: hook.family: not checked: family 'fixture_sum'"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find(ok + ": ok, except the families not checked above"), std::string::npos)
      << r.output;

  r = run("validate --load-plugins " + ok + " " + bad);
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

// Options each in range alone but refused as a whole by the hook's check()
// (ABI 1.5): validate names the file, the line of the key at fault, the key
// and the hook's reason, and exits 1.
TEST(Tool, ValidateRunsEachHooksCheckAndNamesTheLine) {
  for (const auto& job : ddph_test::refused_jobs()) {
    const std::string file = ddph_test::write_temp_file("refused.yaml", job.yaml);
    ToolRun r = run("validate " + file);
    EXPECT_EQ(r.status, 1) << job.name << ":\n" << r.output;
    const std::string at = file + ":" + std::to_string(job.line) + ":";
    EXPECT_NE(r.output.find(at), std::string::npos) << job.name << ":\n" << r.output;
    EXPECT_NE(r.output.find(std::string(job.key) + ": "), std::string::npos) << job.name << ":\n"
                                                                             << r.output;
    EXPECT_NE(r.output.find(job.says), std::string::npos) << job.name << ":\n" << r.output;
  }
}

// The communicator's check: a gloo that has neither an address nor an
// interface to listen on.
TEST(Tool, ValidateRunsTheCommunicatorsCheck) {
  const std::string file = ddph_test::write_temp_file(
      "gloo_no_address.yaml",
      "comm:\n  backend: gloo\n  rendezvous: \"file:///tmp/x\"\n  options:\n    hostname: \"\"\n"
      "hook: {family: default, name: allreduce}\n");
  ToolRun r = run("validate " + file);
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find(file + ":5:5: comm.options.hostname: comm_gloo: option 'hostname' is "
                                 "empty and 'iface' is not set"),
            std::string::npos)
      << r.output;
}

// A third-party check that names its option: validate points at that key.
TEST(Tool, ValidatePointsAtTheOptionAPluginsCheckNames) {
  const std::string file = ddph_test::write_temp_file(
      "check_fixture.yaml", "plugin_path: [" + fixture_dir("check") +
                                "]\ncomm: {backend: fake}\nhook:\n  family: fixture_sum\n"
                                "  name: sum\n  options: {mode: fast,\n    level: 3}\n");
  ToolRun r = run("validate --load-plugins " + file);
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find(file + ":7:5: hook.options.level: sum: level 3 needs "
                                 "mode exact"),
            std::string::npos)
      << r.output;
}

// Every shipped config still validates with the checks in place. A config
// whose communicator this build lacks (nccl.yaml without CUDA, as in the
// sanitizer builds) must say so, and nothing else.
TEST(Tool, TheShippedConfigsValidate) {
  int checked = 0;
  for (const auto& entry : std::filesystem::directory_iterator(DDPH_SOURCE_DIR "/configs")) {
    if (entry.path().extension() != ".yaml") continue;
    const std::string file = entry.path().string();
    ToolRun r = run("validate " + file);
    const std::smatch missing = [&] {
      std::smatch m;
      std::regex_search(r.output, m, std::regex("plugin family '([a-z_0-9]+)' not found"));
      return m;
    }();
    if (!missing.empty() && !std::filesystem::exists(std::string(DDPH_PLUGIN_DIR) + "/libddph_" +
                                                     missing[1].str() + ".so")) {
      EXPECT_EQ(r.status, 1) << r.output;
      continue;
    }
    EXPECT_EQ(r.status, 0) << r.output;
    EXPECT_EQ(r.output, file + ": ok\n");
    ++checked;
  }
  EXPECT_GE(checked, 20);  // configs/ holds 21, nccl.yaml included
}

// Issue 21: `ddph validate` segfaulted on this.
TEST(Tool, ValidateReportsANodeThatContainsItself) {
  std::string file = ddph_test::write_temp_file(
      "self.yaml", "hook: &h {family: default, name: allreduce, options: {x: *h}}\n");
  ToolRun r = run("validate " + file);
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find(file + ":1:58: alias '*h' refers to the node anchored at line 1"),
            std::string::npos)
      << r.output;
}

// Issue 21: the 636-byte bomb took 1.7 GB and printed 4.8 million lines. Run
// in a child, its time and peak memory bounded (a DoS bound, not a benchmark).
TEST(Tool, ValidateOnAnAliasBombIsCheapAndShort) {
  const std::string file = ddph_test::write_temp_file("bomb.yaml", ddph_test::alias_bomb());
  const std::string out = file + ".out";
  const std::string ddph = std::string(DDPH_BIN_DIR) + "/ddph";
  const auto start = std::chrono::steady_clock::now();
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    int fd = open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dup2(fd, 1);
    dup2(fd, 2);
    execl(ddph.c_str(), "ddph", "validate", file.c_str(), (char*)nullptr);
    _exit(127);
  }
  int status = 0;
  rusage usage{};
  double seconds = 0;
  while (wait4(pid, &status, WNOHANG, &usage) == 0) {
    seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (seconds > 60) {  // far past the bound: stop it rather than hang the suite
      kill(pid, SIGKILL);
      wait4(pid, &status, 0, &usage);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const std::string output = slurp(out);
  ASSERT_TRUE(WIFEXITED(status)) << "killed by signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 1) << output.substr(0, 2000);
  EXPECT_LT(seconds, 5.0);
  EXPECT_LT(usage.ru_maxrss, 100 * 1024) << "peak RSS in KiB";  // 1.7 GB before
  EXPECT_LT(output.size(), 400u) << output.substr(0, 2000);
  EXPECT_NE(output.find("grows past 100000 nodes with its aliases expanded, the config reader's "
                        "limit"),
            std::string::npos)
      << output;
}

// Issue 21: validating someone else's job folder ran its plugins' code.
TEST(Tool, ValidateRunsNoCodeOfTheJobsPluginsUnlessAsked) {
  const std::string marker = ddph_test::write_temp_file("marker_made", "");
  std::remove(marker.c_str());
  // The family from plugin_path has a constructor that creates the marker;
  // the rule names a built-in family with a hook it does not have.
  const std::string job = ddph_test::write_temp_file(
      "marker_job.yaml", "plugin_path: [" + fixture_dir("marker") +
                             "]\nhook: {family: fixture_marker, name: sum, options: {level: 9}}\n"
                             "rules:\n  - when: {max_bytes: 1}\n"
                             "    hook: {family: default, name: no_such_hook}\n");
  const std::string env = "DDPH_TEST_MARKER=" + marker;

  ToolRun r = run("validate " + job, env);
  EXPECT_FALSE(exists(marker)) << "the plugin's constructor ran:\n" << r.output;
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find(job +
                          ":2:16: hook.family: not checked: family 'fixture_marker' comes "
                          "from " +
                          fixture_dir("marker") +
                          "/libddph_fixture_marker.so (plugin_path); pass --load-plugins"),
            std::string::npos)
      << r.output;
  // The rest of the file is still checked, built-in families included.
  EXPECT_NE(r.output.find("rules[0].hook.name: family 'default' has no hook 'no_such_hook'"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("hook.options.level"), std::string::npos) << r.output;

  r = run("validate --load-plugins " + job, env);
  EXPECT_TRUE(exists(marker)) << r.output;
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_EQ(r.output.find("not checked"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("hook.options.level: is 9, outside its range [0, 3]"), std::string::npos)
      << r.output;
  std::remove(marker.c_str());
}

TEST(Tool, ValidateHelpNamesLoadPlugins) {
  ToolRun r = run("validate --help");
  EXPECT_EQ(r.status, 0);
  EXPECT_NE(r.output.find("--load-plugins"), std::string::npos) << r.output;
}

TEST(Tool, PluginsListsShadowedCopies) {
  ToolRun r = run("plugins --plugin-path " + fixture_dir("good") + " --plugin-path " +
                  fixture_dir("shadow"));
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("fixture_sum 0.1-fixture (ABI 1." + std::to_string(DDPH_ABI_MINOR) +
                          ") " + fixture_dir("good") + "/libddph_fixture_sum.so\n  shadows " +
                          fixture_dir("shadow") + "/libddph_fixture_sum.so (--plugin-path)\n"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("ddph warn"), std::string::npos) << r.output;

  // A copy of a built-in family: listed, with what a job needs to use it.
  const std::string builtin = std::string(DDPH_PLUGIN_DIR) + "/libddph_comm_gloo.so";
  ASSERT_TRUE(exists(builtin));
  r = run("plugins --plugin-path " + fixture_dir("fake_gloo"));
  EXPECT_NE(r.output.find(fixture_dir("fake_gloo") + "/libddph_comm_gloo.so\n  shadows " + builtin +
                          " (built in)\n  a job uses " + fixture_dir("fake_gloo") +
                          "/libddph_comm_gloo.so only with `replace_builtin: [comm_gloo]`"),
            std::string::npos)
      << r.output;
}
