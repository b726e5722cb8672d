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

#include <chrono>
#include <fstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "loader/tool/output_file.h"
#include "tests/support/multiprocess.h"
#include "tests/tool/run_ddph.h"

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

// Every entry of dir but . and ..
std::vector<std::string> entries(const std::string& dir) {
  std::vector<std::string> names;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d))
      if (std::string(e->d_name) != "." && std::string(e->d_name) != "..")
        names.push_back(e->d_name);
    closedir(d);
  }
  return names;
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
  EXPECT_TRUE(entries(tmp).empty()) << "left in TMPDIR: " << entries(tmp).size();
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

}  // namespace
