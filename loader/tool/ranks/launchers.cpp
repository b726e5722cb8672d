#include "loader/tool/ranks/launchers.h"

#include <ftw.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <thread>

#include "loader/config.h"

namespace ddph::tool {

std::string RankExit::describe() const {
  std::string s = "rank " + std::to_string(rank);
  if (exited) return s + " exited with code " + std::to_string(code);
  s += std::string(" ended by signal ") + strsignal(signal);
  if (killed) s += " (killed by ddph: it outlived the deadline or a failed peer)";
  return s;
}

std::vector<RankExit> run_local_ranks(int world, const std::function<int(int)>& body,
                                      double timeout_s, double grace_s) {
  using Clock = std::chrono::steady_clock;
  std::fflush(stdout);  // or the children would print the parent's buffer again
  std::fflush(stderr);
  std::vector<pid_t> pids(world, -1);
  std::vector<RankExit> exits(world);
  pid_t parent = getpid();
  for (int r = 0; r < world; ++r) {
    exits[r].rank = r;
    pid_t pid = fork();
    if (pid < 0) throw std::runtime_error(std::string("fork failed: ") + std::strerror(errno));
    if (pid == 0) {
      // A child must not outlive a parent that was interrupted.
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(1);
      int code = body(r);
      std::fflush(stdout);
      std::fflush(stderr);
      _exit(code);
    }
    pids[r] = pid;
  }
  auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                     std::chrono::duration<double>(timeout_s));
  bool failed = false;
  int running = world;
  while (running > 0) {
    bool reaped = false;
    for (int r = 0; r < world; ++r) {
      if (pids[r] < 0) continue;
      int status = 0;
      pid_t got = waitpid(pids[r], &status, WNOHANG);
      if (got != pids[r]) continue;
      reaped = true;
      pids[r] = -1;
      --running;
      exits[r].exited = WIFEXITED(status);
      exits[r].code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      exits[r].signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
      if (!exits[r].ok() && !failed) {
        failed = true;
        auto grace = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                        std::chrono::duration<double>(grace_s));
        if (grace < deadline) deadline = grace;
      }
    }
    if (running == 0) break;
    if (Clock::now() >= deadline) {
      for (int r = 0; r < world; ++r) {
        if (pids[r] < 0) continue;
        kill(pids[r], SIGKILL);
        exits[r].killed = true;
      }
      deadline = Clock::time_point::max();  // now just reap them
    }
    if (!reaped) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return exits;
}

bool report_ranks(const char* tool, const std::vector<RankExit>& exits) {
  bool all = true;
  for (const RankExit& e : exits) {
    if (e.ok()) continue;
    all = false;
    std::fprintf(stderr, "%s: %s\n", tool, e.describe().c_str());
  }
  return all;
}

std::string make_temp_dir(const char* tag) {
  const char* base = std::getenv("TMPDIR");
  std::string templ = std::string(base != nullptr && *base ? base : "/tmp") + "/" + tag + "-XXXXXX";
  std::vector<char> buf(templ.begin(), templ.end());
  buf.push_back('\0');
  if (mkdtemp(buf.data()) == nullptr)
    throw std::runtime_error("cannot make a temporary directory from " + templ + ": " +
                             std::strerror(errno));
  return buf.data();
}

void remove_tree(const std::string& dir) {
  nftw(
      dir.c_str(),
      [](const char* path, const struct stat*, int, struct FTW*) { return std::remove(path); }, 16,
      FTW_DEPTH | FTW_PHYS);
}

namespace {

bool read_int(const char* name, int min, int* out) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return false;
  char* end = nullptr;
  const long v = std::strtol(text, &end, 10);
  if (*end != '\0' || v < min || v > 1 << 20)
    throw std::runtime_error(std::string("the MPI launcher's ") + name + " is '" + text +
                             "', not a rank count");
  *out = static_cast<int>(v);
  return true;
}

}  // namespace

LauncherPlacement mpi_launcher_placement(const std::string& config_path) {
  LauncherPlacement p;
  ddph::loader::Problems problems;  // the session reports them; only the backend matters here
  const ddph::loader::Config config = ddph::loader::parse_config_file(config_path, problems);
  if (config.comm.backend != "mpi") return p;
  const char* pairs[][2] = {{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
                            {"PMI_RANK", "PMI_SIZE"}};
  for (const auto& names : pairs) {
    int rank = 0, world = 0;
    if (!read_int(names[0], 0, &rank)) continue;
    if (!read_int(names[1], 1, &world))
      throw std::runtime_error(std::string(names[0]) + " is set but " + names[1] + " is not");
    if (rank >= world)
      throw std::runtime_error(std::string("the MPI launcher's ") + names[0] + " " +
                               std::to_string(rank) + " is not below " + names[1] + " " +
                               std::to_string(world));
    p.found = true;
    p.rank = rank;
    p.world = world;
    return p;
  }
  return p;
}

}  // namespace ddph::tool
