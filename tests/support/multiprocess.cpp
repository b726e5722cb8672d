#include "tests/support/multiprocess.h"

#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <thread>

namespace ddph_test {

std::string make_temp_dir(const char* tag) {
  std::string tmpl = std::string("/tmp/") + tag + "-XXXXXX";
  char* dir = mkdtemp(&tmpl[0]);
  if (dir == nullptr) {
    perror("mkdtemp");
    abort();
  }
  return dir;
}

std::vector<std::string> dir_entries(const std::string& dir) {
  std::vector<std::string> names;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(dir, error))
    names.push_back(entry.path().filename().string());
  return names;
}

std::vector<RankResult> run_ranks(int world,
                                  const std::function<int(int, int, const std::string&)>& body,
                                  double timeout_s) {
  const std::string dir = make_temp_dir();
  std::fflush(stdout);
  std::fflush(stderr);
  std::vector<pid_t> pids(world, -1);
  for (int r = 0; r < world; ++r) {
    pid_t pid = fork();
    if (pid == 0) {
      int code = 1;
      try {
        code = body(r, world, dir);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "[rank %d] uncaught exception: %s\n", r, e.what());
      }
      std::fflush(stdout);
      std::fflush(stderr);
      _exit(code);
    }
    pids[r] = pid;
  }
  std::vector<RankResult> results(world);
  std::vector<bool> finished(world, false);
  int remaining = world;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (remaining > 0) {
    for (int r = 0; r < world; ++r) {
      if (finished[r]) continue;
      int status = 0;
      if (waitpid(pids[r], &status, WNOHANG) == pids[r]) {
        finished[r] = true;
        --remaining;
        if (WIFEXITED(status)) results[r].exit_code = WEXITSTATUS(status);
        if (WIFSIGNALED(status)) results[r].signal = WTERMSIG(status);
      }
    }
    if (remaining == 0) break;
    if (std::chrono::steady_clock::now() > deadline) {
      for (int r = 0; r < world; ++r) {
        if (finished[r]) continue;
        kill(pids[r], SIGKILL);
        waitpid(pids[r], nullptr, 0);
        results[r].timed_out = true;
      }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  std::string rm = "rm -rf '" + dir + "'";
  if (std::system(rm.c_str()) != 0) std::fprintf(stderr, "could not remove %s\n", dir.c_str());
  return results;
}

void child_fail(const char* file, int line, const char* cond, const std::string& message) {
  std::fprintf(stderr, "[pid %d] %s:%d: check failed: %s %s\n", int(getpid()), file, line, cond,
               message.c_str());
}

std::string format(const char* fmt, ...) {
  char buf[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  return buf;
}

bool all_passed(const std::vector<RankResult>& results) {
  for (const auto& r : results)
    if (r.exit_code != 0 || r.timed_out) return false;
  return true;
}

std::string describe(const std::vector<RankResult>& results) {
  std::string s;
  for (size_t r = 0; r < results.size(); ++r) {
    const RankResult& x = results[r];
    s += "rank " + std::to_string(r) + ": ";
    if (x.timed_out)
      s += "TIMED OUT";
    else if (x.signal)
      s += "killed by signal " + std::to_string(x.signal);
    else
      s += "exit " + std::to_string(x.exit_code);
    s += "; ";
  }
  return s;
}

}  // namespace ddph_test
