// The files and processes of the ddph tool (issue 38, "Files and processes"):
// every file it writes is checked (a failed write is an error naming the
// file), and nothing it starts outlives it: neither a rank's leftover
// processes in a lab namespace nor a launcher's temporary store directory.
#include <dirent.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <functional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/multiprocess.h"
#include "tests/tool/run_ddph.h"
#include "tool/output_file.h"

namespace {

using ddph::tool::OutputFile;
using ddph::tool::write_output_file;
using ddph_tool_test::describe;
using ddph_tool_test::kConfigs;
using ddph_tool_test::kDdph;
using ddph_tool_test::Result;
using ddph_tool_test::slurp;

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

std::string error_of(const std::function<void()>& body) {
  try {
    body();
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

// `env... ddph args` through the shell with stdout sent to `out` (a file
// name, or /dev/full); stderr is read back.
Result run(const std::string& env, const std::string& args, const std::string& out = "") {
  const std::string dir = ddph_test::make_temp_dir("ddph-files");
  const std::string out_file = out.empty() ? dir + "/out" : out;
  const std::string cmd = "DDPH_PLUGIN_PATH=" + std::string(DDPH_PLUGIN_DIR) + " " + env + " " +
                          kDdph + " " + args + " >" + out_file + " 2>" + dir + "/err";
  Result r;
  const int status = std::system(cmd.c_str());
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  if (out.empty()) r.out = slurp(out_file);
  r.err = slurp(dir + "/err");
  std::system(("rm -rf " + dir).c_str());
  return r;
}

const std::string kTrain =
    "train --config " + kConfigs + "allreduce.yaml --steps 20 --log-every 10";

// --- Case 10: one checked writer for every file the tool writes ----------

TEST(OutputFile, AFullDiskIsAnErrorNamingTheFile) {
  OutputFile f("/dev/full", "--metrics");
  f.write("step,loss\n");
  const std::string err = error_of([&] { f.flush(); });
  EXPECT_EQ(err, "--metrics: cannot write /dev/full: No space left on device");
  EXPECT_EQ(error_of([] { write_output_file("/dev/full", "x", "the report"); }),
            "the report: cannot write /dev/full: No space left on device");
}

TEST(OutputFile, AMissingFolderOrAFolderAsTheFileIsNamed) {
  const std::string dir = ddph_test::make_temp_dir("ddph-files");
  EXPECT_EQ(error_of([&] { OutputFile(dir + "/no/such/m.csv", "--metrics"); }),
            "--metrics: cannot create " + dir +
                "/no/such/m.csv: No such file or directory (the "
                "folder " +
                dir + "/no/such does not exist)");
  EXPECT_EQ(error_of([&] { OutputFile(dir, "--metrics"); }),
            "--metrics: cannot create " + dir + ": Is a directory");
  EXPECT_EQ(error_of([] { OutputFile("", "--metrics"); }), "--metrics: no file name given");
  // What arrives is exactly what was written, closed checked.
  write_output_file(dir + "/ok.csv", "a,b\n1,2\n", "--metrics");
  EXPECT_EQ(slurp(dir + "/ok.csv"), "a,b\n1,2\n");
  std::system(("rm -rf " + dir).c_str());
}

// Issue 38, case 10: `ddph train --metrics /dev/full` exited 0 with nothing
// written, and a missing folder was found only after the ranks connected.
TEST(ToolFiles, AMetricsFileThatCannotBeWrittenFailsBeforeAnyRankStarts) {
  const std::string tmp = ddph_test::make_temp_dir("ddph-files-tmp");
  Result r = run("TMPDIR=" + tmp, kTrain + " --metrics /dev/full");
  EXPECT_EQ(r.code, 2) << describe(r);
  EXPECT_TRUE(has(r.err, "ddph train: --metrics: cannot write /dev/full: No space left on device"))
      << describe(r);
  EXPECT_EQ(r.out, "") << "a rank ran: " << describe(r);
  r = run("TMPDIR=" + tmp, kTrain + " --metrics " + tmp + "/missing/m.csv");
  EXPECT_EQ(r.code, 2) << describe(r);
  EXPECT_TRUE(has(r.err, "the folder " + tmp + "/missing does not exist")) << describe(r);
  EXPECT_EQ(r.out, "") << describe(r);
  // No rank started: the launcher made no store directory.
  EXPECT_TRUE(ddph_test::dir_entries(tmp).empty())
      << "left in TMPDIR: " << ddph_test::dir_entries(tmp).size();
  // A good path gets the header and a row per logged step.
  r = run("TMPDIR=" + tmp, kTrain + " --metrics " + tmp + "/m.csv");
  ASSERT_EQ(r.code, 0) << describe(r);
  const std::string csv = slurp(tmp + "/m.csv");
  EXPECT_EQ(csv.compare(0, 10, "step,loss,"), 0) << csv;
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 4) << csv;  // header, steps 1, 10, 20
  std::system(("rm -rf " + tmp).c_str());
}

TEST(ToolFiles, StandardOutputThatCannotBeWrittenIsAFailure) {
  const Result r = run("", kTrain + " --json", "/dev/full");
  EXPECT_NE(r.code, 0) << describe(r);
  EXPECT_TRUE(has(r.err, "cannot write standard output")) << describe(r);
}

// --- Case 17: nothing a lab rank leaves running outlives the command ------

// Pids of the processes whose command line holds `part`.
std::vector<int> processes_with(const std::string& part) {
  std::vector<int> pids;
  for (const std::string& name : ddph_test::dir_entries("/proc")) {
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string cmdline = slurp("/proc/" + name + "/cmdline");
    std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
    if (has(cmdline, part) && std::stoi(name) != getpid()) pids.push_back(std::stoi(name));
  }
  return pids;
}

// Polls for up to limit_s until no process holds `part` in its command line.
bool none_left(const std::string& part, double limit_s) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(limit_s);
  while (!processes_with(part).empty()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

// Issue 38, case 17: `ddph lab -- sh -c 'sleep 4244 & exit 0'` exited 0 and
// left both sleeps running, each in its namespace.
TEST(ToolProcesses, WhatALabRankLeavesRunningIsKilledAndNamed) {
  const Result probe = run("", "lab --link 1gbit -- true");
  if (probe.code == 3) GTEST_SKIP() << probe.err.substr(0, probe.err.find('\n'));
  ASSERT_EQ(probe.code, 0) << describe(probe);
  // A sleep no other test starts; one backgrounded and one after setsid,
  // which leaves the rank's process group and session.
  const std::string mark = "4244." + std::to_string(getpid());
  const Result r = run("", "lab --link 1gbit --world 2 -- sh -c 'sleep " + mark +
                               " & setsid sleep " + mark + " & exit 0'");
  const std::vector<int> left = processes_with("sleep " + mark);
  for (int pid : left) kill(pid, SIGKILL);
  EXPECT_TRUE(left.empty()) << left.size() << " sleeps outlived the lab\n" << describe(r);
  EXPECT_EQ(r.code, 0) << describe(r);
  for (const char* rank : {"rank 0", "rank 1"})
    EXPECT_TRUE(has(r.err, std::string("ddph lab: ") + rank +
                               "'s command left processes running in its namespace, killed: pid "))
        << describe(r);
  EXPECT_TRUE(has(r.err, "(sleep)")) << describe(r);
  // A command that leaves nothing gets no such line.
  const Result clean = run("", "lab --link 1gbit --world 2 -- true");
  EXPECT_EQ(clean.code, 0) << describe(clean);
  EXPECT_FALSE(has(clean.err, "left processes")) << describe(clean);
}

// --- Case 18: a launcher's temporary store goes with it, however it ends --

struct Launch {
  pid_t pid = -1;
  std::string tmp, out, job;
};

// `ddph train` with TMPDIR of its own, long enough to be stopped; returns
// once its ranks trained their first step (they met on the store).
Launch start_training(const std::string& tag) {
  Launch l;
  l.tmp = ddph_test::make_temp_dir("ddph-files-tmp");
  l.out = l.tmp + ".out";
  l.job = "files-test-" + std::to_string(getpid()) + "-" + tag;
  std::fflush(stdout);
  std::fflush(stderr);
  l.pid = fork();
  if (l.pid == 0) {
    // As from a terminal: a launcher started with one of them ignored (a
    // shell's background job, nohup) keeps it ignored.
    for (int sig : {SIGINT, SIGTERM, SIGHUP}) signal(sig, SIG_DFL);
    setenv("TMPDIR", l.tmp.c_str(), 1);
    setenv("DDPH_PLUGIN_PATH", DDPH_PLUGIN_DIR, 1);
    freopen(l.out.c_str(), "w", stdout);
    const std::string config = kConfigs + "allreduce.yaml";
    execl(kDdph.c_str(), "ddph", "train", "--config", config.c_str(), "--steps", "100000000",
          "--log-every", "100000000", "--timeout", "120", "--job", l.job.c_str(), nullptr);
    _exit(127);
  }
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!has(slurp(l.out), "step      1") && std::chrono::steady_clock::now() < end)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  if (!has(slurp(l.out), "step      1")) {  // the caller's assertion says so; leave nothing
    kill(l.pid, SIGKILL);
    waitpid(l.pid, nullptr, 0);
  }
  return l;
}

// Issue 38, case 18: the temporary store directory stayed behind after
// SIGTERM, SIGHUP or SIGKILL of the launcher.
TEST(ToolProcesses, AStoppedLauncherEndsItsRanksRemovesItsStoreAndDiesByTheSignal) {
  for (int sig : {SIGTERM, SIGHUP, SIGINT}) {
    SCOPED_TRACE(strsignal(sig));
    const Launch l = start_training(std::to_string(sig));
    ASSERT_TRUE(has(slurp(l.out), "step      1")) << "the ranks did not start: " << slurp(l.out);
    ASSERT_EQ(ddph_test::dir_entries(l.tmp).size(), 1u);  // the store
    ASSERT_EQ(kill(l.pid, sig), 0);
    int status = 0;
    ASSERT_EQ(waitpid(l.pid, &status, 0), l.pid);
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == sig) << "status " << status;
    // Cleaned before it died: nothing to wait for.
    EXPECT_TRUE(ddph_test::dir_entries(l.tmp).empty()) << ddph_test::dir_entries(l.tmp)[0];
    // Its ranks are gone; the watcher (ScratchDir) follows within moments.
    EXPECT_TRUE(none_left("--rendezvous file://" + l.tmp, 0.0));
    EXPECT_TRUE(none_left(l.job, 30.0));
    std::system(("rm -rf " + l.tmp + " " + l.out).c_str());
  }
}

TEST(ToolProcesses, AKilledLaunchersStoreIsRemovedOnceItsRanksAreGone) {
  const Launch l = start_training("kill");
  ASSERT_TRUE(has(slurp(l.out), "step      1")) << "the ranks did not start: " << slurp(l.out);
  ASSERT_EQ(ddph_test::dir_entries(l.tmp).size(), 1u);
  ASSERT_EQ(kill(l.pid, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(waitpid(l.pid, &status, 0), l.pid);
  // Nothing runs in a killed launcher: its ranks die with it (PDEATHSIG),
  // and its watcher removes the store once they are gone. 30 s is the bound
  // of a loaded machine; it takes milliseconds.
  EXPECT_TRUE(none_left(l.job, 30.0)) << processes_with(l.job).size() << " processes left";
  EXPECT_TRUE(ddph_test::dir_entries(l.tmp).empty()) << ddph_test::dir_entries(l.tmp)[0];
  std::system(("rm -rf " + l.tmp + " " + l.out).c_str());
}

}  // namespace
