// The built `ddph` binary as a subprocess, for the tool's end-to-end tests.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "tests/support/multiprocess.h"

namespace ddph_tool_test {

const std::string kDdph = std::string(DDPH_BIN_DIR) + "/ddph";
const std::string kConfigs = std::string(DDPH_SOURCE_DIR) + "/configs/";

struct Result {
  int code = -1;
  std::string out, err;
};

inline std::string slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Runs `ddph <args>` through the shell, stdout and stderr kept apart.
inline Result ddph(const std::string& args) {
  std::string dir = ddph_test::make_temp_dir("ddph-cli");
  std::string out = dir + "/out", err = dir + "/err";
  std::string cmd = "DDPH_PLUGIN_PATH=" + std::string(DDPH_PLUGIN_DIR) + " " + kDdph + " " + args +
                    " >" + out + " 2>" + err;
  Result r;
  int status = std::system(cmd.c_str());
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = slurp(out);
  r.err = slurp(err);
  std::system(("rm -rf " + dir).c_str());
  return r;
}

inline std::string describe(const Result& r) {
  return "exit " + std::to_string(r.code) + "\nstdout:\n" + r.out + "\nstderr:\n" + r.err;
}

// One --json line: {"key":value,...} with string or number values.
inline std::map<std::string, std::string> parse_json_line(const std::string& line) {
  std::map<std::string, std::string> kv;
  std::regex re(R"re("([a-z_]+)":("(?:[^"\\]|\\.)*"|[-+0-9.eE]+))re");
  for (std::sregex_iterator it(line.begin(), line.end(), re), end; it != end; ++it)
    kv[(*it)[1]] = (*it)[2];
  return kv;
}

inline std::vector<std::map<std::string, std::string>> json_lines(const std::string& out) {
  std::vector<std::map<std::string, std::string>> rows;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    EXPECT_EQ(line.front(), '{') << line;
    EXPECT_EQ(line.back(), '}') << line;
    rows.push_back(parse_json_line(line));
  }
  return rows;
}

// Runs `ddph <args>` (a --json command that prints one line) and returns
// that line's keys; empty, with the failure recorded, when it exits
// non-zero or prints another number of lines. *out gets the output.
inline std::map<std::string, std::string> one_json_row(const std::string& args, std::string* out) {
  const Result r = ddph(args);
  *out = describe(r);
  EXPECT_EQ(r.code, 0) << *out;
  if (r.code != 0) return {};
  std::vector<std::map<std::string, std::string>> rows = json_lines(r.out);
  EXPECT_EQ(rows.size(), 1u) << *out;
  return rows.size() == 1 ? rows[0] : std::map<std::string, std::string>{};
}

}  // namespace ddph_tool_test
