// Every number and value a `ddph` flag takes is checked at parse time, in one
// place (tool/cli.h): NaN, infinity, out-of-range, wrapped negative,
// fractional and empty values are refused as usage errors (exit 2) with a
// message naming the flag, before any rank starts.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "tests/tool/run_ddph.h"

namespace {

using ddph_tool_test::ddph;
using ddph_tool_test::describe;
using ddph_tool_test::kConfigs;
using ddph_tool_test::kDdph;
using ddph_tool_test::Result;

class ToolFlags : public ::testing::Test {
 protected:
  void SetUp() override {
    if (access(kDdph.c_str(), X_OK) != 0) GTEST_SKIP() << kDdph << " is not built";
  }
};

struct BadFlag {
  const char* command;  // the sub-command and what it needs besides the flag
  const char* flag;
  const char* value;
  const char* message;  // a part of the expected message on stderr
};

// Each command's prefix: a valid config, so that only the flag is wrong.
std::string prefix(const std::string& command) {
  if (command == "train" || command == "bench")
    return command + " --config " + kConfigs + "allreduce.yaml";
  if (command == "lab") return "lab --link 1gbit";
  return command;
}

// Before the fix, each of these ran: NaN passed CLI11's Range (--timeout nan
// killed the ranks at once or never timed out, --lr nan trained to a NaN
// loss and exited 0), --seed -1 wrapped to 2^64-1, 0.1B was 0 bytes, a
// 99999999x99999999 matrix tiled nothing and an empty --metrics or --link
// was ignored.
const BadFlag kBadFlags[] = {
    {"train", "--timeout", "nan", "--timeout: 'nan' is not a finite number (from 1 to 1e+06)"},
    {"train", "--timeout", "inf", "--timeout: 'inf' is not a finite number"},
    {"train", "--timeout", "0.5", "--timeout: '0.5' is not from 1 to 1e+06"},
    {"train", "--lr", "nan", "--lr: 'nan' is not a finite number (from 0 to 100)"},
    {"train", "--lr", "-inf", "--lr: '-inf' is not a finite number"},
    {"train", "--momentum", "nan", "--momentum: 'nan' is not a finite number (from 0 to 1)"},
    {"train", "--momentum", "1.5", "--momentum: '1.5' is not from 0 to 1"},
    {"train", "--seed", "-1", "--seed: '-1' is not from 0 to 18446744073709551615"},
    {"train", "--seed", "18446744073709551616", "--seed: '18446744073709551616' is not from 0"},
    {"train", "--steps", "nan", "--steps: 'nan' is not a whole number (from 1 to 100000000)"},
    {"train", "--steps", "1.5", "--steps: '1.5' is not a whole number"},
    {"train", "--hidden", "0", "--hidden: '0' is not from 1 to 16384"},
    {"train", "--batch", "-3", "--batch: '-3' is not from 1 to 1048576"},
    {"train", "--log-every", "0x10", "--log-every: '0x10' is not a whole number"},
    {"train", "--world", "nan", "--world: 'nan' is not a whole number (from 1 to 1024)"},
    {"train", "--bucket-size", "0.1B", "--bucket-size: '0.1B' is not a whole number of bytes"},
    {"train", "--bucket-size", "0.0001KiB", "--bucket-size: '0.0001KiB' is less than a byte"},
    {"train", "--bucket-size", "nanMiB", "--bucket-size: 'nanMiB' is not between 1B and 64GiB"},
    {"train", "--metrics", "''", "--metrics: an empty value is not allowed"},
    {"train", "--link", "''", "--link: an empty value is not allowed"},
    {"bench", "--timeout", "nan", "--timeout: 'nan' is not a finite number (from 1 to 1e+06)"},
    {"bench", "--backward-ms", "nan",
     "--backward-ms: 'nan' is not a finite number (from 0 to 100000)"},
    {"bench", "--iters", "nan", "--iters: 'nan' is not a whole number (from 1 to 1000000)"},
    {"bench", "--warmup", "-1", "--warmup: '-1' is not from 0 to 1000000"},
    {"bench", "--overlap", "inf", "--overlap: 'inf' is not a whole number (from 1 to 4096)"},
    {"bench", "--machines", "0", "--machines: '0' is not from 1 to 256"},
    {"bench", "--world", "257", "--world: '257' is not from 1 to 256"},
    {"bench", "--bucket-size", "0.5B", "--bucket-size: '0.5B' is not a whole number of bytes"},
    {"bench", "--matrix", "99999999x99999999",
     "--matrix 99999999x99999999 is 9999999800000001 elements, more than the --bucket-size "
     "25MiB bucket holds (6553600 f32 elements)"},
    {"bench", "--link", "''", "--link: an empty value is not allowed"},
    {"choose", "--timeout", "nan", "--timeout: 'nan' is not a finite number (from 1 to 1e+06)"},
    {"choose", "--steps", "0", "--steps: '0' is not from 1 to 1000000"},
    {"choose", "--world", "1", "--world: '1' is not from 2 to 256"},
    {"choose", "--bucket-size", "0.5B", "--bucket-size: '0.5B' is not a whole number of bytes"},
    {"choose", "--candidates", "''", "--candidates: an empty value is not allowed"},
    {"choose", "--link", "''", "--link: an empty value is not allowed"},
    {"lab", "--timeout", "nan", "--timeout: 'nan' is not a finite number (from 1 to 1e+06)"},
    {"lab", "--port", "nan", "--port: 'nan' is not a whole number (from 1024 to 65535)"},
    {"lab", "--world", "-2", "--world: '-2' is not from 1"},
    {"validate-plugin", "--timeout", "nan",
     "--timeout: 'nan' is not a finite number (from 0.001 to 86400)"},
    {"validate-plugin", "--timeout", "1e400", "--timeout: '1e400' is not a finite number"},
};

TEST_F(ToolFlags, EveryNumericFlagRefusesNanInfinityAndOutOfRangeValues) {
  for (const BadFlag& b : kBadFlags) {
    const std::string args = prefix(b.command) + " " + b.flag + " " + b.value +
                             (std::string(b.command) == "lab" ? " -- true" : "");
    const Result r = ddph(args);
    EXPECT_EQ(r.code, 2) << "ddph " << args << "\n" << describe(r);
    EXPECT_NE(r.err.find(b.message), std::string::npos)
        << "ddph " << args << "\nwanted: " << b.message << "\n"
        << describe(r);
  }
}

// The checks refuse only what is wrong: values at the ends of each range,
// and the spellings the docs show, still parse (--help after them, so
// nothing runs).
TEST_F(ToolFlags, ValuesInRangeStillParse) {
  const std::vector<std::string> good = {
      "train --timeout 1 --lr 0 --momentum 1 --seed 18446744073709551615 --steps 1",
      "train --seed 0 --hidden 16384 --bucket-size 0.1MiB --world 1024 --rank 1023",
      "train --bucket-size 1B --log-every 010",
      "bench --backward-ms 0 --iters 1 --warmup 0 --timeout 1e6 --bucket-size 0.001MiB",
      "lab --port 1024 --timeout 1 --world 1",
      "validate-plugin --timeout 0.001"};
  for (const std::string& args : good) {
    const Result r = ddph(args + " --help");
    EXPECT_EQ(r.code, 0) << "ddph " << args << "\n" << describe(r);
  }
}

// A folder given as the job file: every command says it is a directory
// (before, the YAML reader saw no text and said "the file is empty"), and
// `train` says so once, before any rank starts.
TEST_F(ToolFlags, AConfigThatIsADirectoryIsNamedAsOne) {
  const std::string dir = ddph_test::make_temp_dir("ddph-flags-config");
  const Result train = ddph("train --config " + dir + " --steps 1");
  const Result bench = ddph("bench --config " + dir + " --iters 1");
  const Result validate = ddph("validate " + dir);
  std::system(("rm -rf " + dir).c_str());
  EXPECT_EQ(train.code, 2) << describe(train);
  EXPECT_NE(train.err.find("--config " + dir + " is a directory, not a config file"),
            std::string::npos)
      << describe(train);
  EXPECT_EQ(train.err.find("rank"), std::string::npos) << describe(train);
  for (const Result& r : {bench, validate}) {
    EXPECT_NE(r.code, 0) << describe(r);
    // validate lists its findings on stdout, bench on stderr.
    const std::string said = r.out + r.err;
    EXPECT_NE(said.find(dir + ": is a directory, not a config file"), std::string::npos)
        << describe(r);
    EXPECT_EQ(said.find("empty"), std::string::npos) << describe(r);
  }
}

// A legal --hidden never times out for the tool's own bookkeeping: rank 0
// scored the whole test set alone after the last step while rank 1 waited
// in the final allgather, so a wide model outlasted comm.timeout
// (`--hidden 16384`: DDPH_TIMEOUT after 78 s with timeout 30s). Here the test
// set alone took rank 0 3.6 s, over twice the 1.5 s timeout, on a quiet
// 2-core machine (longer under load); each rank's half of it, scored at the
// same time as the other's, leaves the ranks apart by far less.
TEST_F(ToolFlags, AWideHiddenLayerDoesNotOutlastTheCommTimeout) {
  const std::string dir = ddph_test::make_temp_dir("ddph-flags-wide");
  const std::string config = dir + "/short_timeout.yaml";
  std::ofstream(config) << "comm: {backend: gloo, timeout: 1500ms}\n"
                           "hook: {family: default, name: allreduce, options: {}}\n";
  const Result r = ddph("train --config " + config + " --steps 1 --hidden 2048");
  std::system(("rm -rf " + dir).c_str());
  EXPECT_EQ(r.code, 0) << describe(r);
  EXPECT_EQ(r.err.find("DDPH_TIMEOUT"), std::string::npos) << describe(r);
  EXPECT_NE(r.out.find("bit-identical on all 2 ranks"), std::string::npos) << describe(r);
}

}  // namespace
