// Runs a test body as several real processes (ranks) on this machine.
//
// fork() happens before the parent creates any thread of its own, so each
// child starts clean; children report through their exit code and stderr,
// since gtest assertions in a child do not reach the parent.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace ddph_test {

struct RankResult {
  int exit_code = -1;  // -1: killed by a signal or by the timeout
  int signal = 0;
  bool timed_out = false;
};

// Forks `world` children running body(rank, world, dir); dir is a fresh
// temporary directory shared by all ranks (for a file store). A child's exit
// code is body's return value (0 = pass). Children still running after
// timeout_s are killed and marked timed_out.
std::vector<RankResult> run_ranks(
    int world, const std::function<int(int rank, int world, const std::string& dir)>& body,
    double timeout_s = 60.0);

// A fresh temporary directory (removed by the caller if it cares).
std::string make_temp_dir(const char* tag = "ddph-test");

// The names in dir, without . and .. (none if dir cannot be read).
std::vector<std::string> dir_entries(const std::string& dir);

// For use inside a child: prints the failure with rank, file and line and
// makes the child's exit code non-zero.
#define DDPH_CHILD_CHECK(cond, ...)                                                         \
  do {                                                                                      \
    if (!(cond)) {                                                                          \
      ::ddph_test::child_fail(__FILE__, __LINE__, #cond, ::ddph_test::format(__VA_ARGS__)); \
      return 1;                                                                             \
    }                                                                                       \
  } while (0)

void child_fail(const char* file, int line, const char* cond, const std::string& message);
std::string format(const char* fmt = "", ...) __attribute__((format(printf, 1, 2)));

// gtest assertion that every rank exited 0 (and none timed out).
std::string describe(const std::vector<RankResult>& results);
bool all_passed(const std::vector<RankResult>& results);

}  // namespace ddph_test
