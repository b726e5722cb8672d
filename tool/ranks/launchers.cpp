#include "tool/ranks/launchers.h"

#include <fcntl.h>
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

#include "loader/job/config.h"

namespace ddph::tool {

std::string RankExit::describe() const {
  std::string s = "rank " + std::to_string(rank);
  if (exited) return s + " exited with code " + std::to_string(code);
  s += std::string(" ended by signal ") + strsignal(signal);
  if (killed) s += " (killed by ddph: it outlived the deadline or a failed peer)";
  return s;
}

namespace {

const int kStopSignals[] = {SIGINT, SIGTERM, SIGHUP};
volatile sig_atomic_t g_stop_signal = 0;  // the first of them that came

void on_stop_signal(int sig) {
  if (g_stop_signal == 0) g_stop_signal = sig;
}

// A signal this process was started with ignored (nohup's SIGHUP, SIGINT in
// a shell's background job) stays ignored, in the launcher and its ranks.
bool ignored_at_start[3] = {false, false, false};
bool caught = false;

void catch_stop_signals() {
  if (caught) return;
  caught = true;
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  for (int i = 0; i < 3; ++i) {
    struct sigaction old {};
    sigaction(kStopSignals[i], nullptr, &old);
    ignored_at_start[i] = old.sa_handler == SIG_IGN;
    if (!ignored_at_start[i]) sigaction(kStopSignals[i], &sa, nullptr);
  }
}

// In a rank: the dispositions the launcher was started with.
void restore_stop_signals() {
  for (int i = 0; i < 3; ++i) signal(kStopSignals[i], ignored_at_start[i] ? SIG_IGN : SIG_DFL);
}

const char* signal_name(int sig) {
  switch (sig) {
    case SIGINT:
      return "SIGINT";
    case SIGTERM:
      return "SIGTERM";
    case SIGHUP:
      return "SIGHUP";
  }
  return "a signal";
}

}  // namespace

std::vector<RankExit> run_local_ranks(int world, const std::function<int(int)>& body,
                                      double timeout_s, double grace_s) {
  using Clock = std::chrono::steady_clock;
  catch_stop_signals();
  std::fflush(stdout);  // or the children would print the parent's buffer again
  std::fflush(stderr);
  std::vector<pid_t> pids(world, -1);
  std::vector<RankExit> exits(world);
  std::vector<Clock::time_point> started(world);
  pid_t parent = getpid();
  for (int r = 0; r < world; ++r) {
    exits[r].rank = r;
    started[r] = Clock::now();
    pid_t pid = fork();
    if (pid < 0) throw std::runtime_error(std::string("fork failed: ") + std::strerror(errno));
    if (pid == 0) {
      // A child must not outlive a parent that was interrupted.
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(1);
      // A rank that does not exec ends by these signals as a process does.
      restore_stop_signals();
      // A rank never returns into the launcher's code (whose destructors
      // would remove what the other ranks still use).
      int code = 1;
      try {
        code = body(r);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "rank %d: %s\n", r, e.what());
      } catch (...) {
        std::fprintf(stderr, "rank %d: unknown exception\n", r);
      }
      std::fflush(stdout);
      std::fflush(stderr);
      _exit(code);
    }
    pids[r] = pid;
  }
  auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                     std::chrono::duration<double>(timeout_s));
  bool failed = false, stopping = false;
  int running = world;
  while (running > 0) {
    if (g_stop_signal != 0 && !stopping) {
      // Stopped: the ranks get the signal, then SIGKILL after 2 s.
      stopping = true;
      for (int r = 0; r < world; ++r) {
        if (pids[r] < 0) continue;
        kill(pids[r], g_stop_signal);
        exits[r].killed = true;
      }
      const auto grace = Clock::now() + std::chrono::seconds(2);
      if (grace < deadline) deadline = grace;
    }
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
      exits[r].seconds = std::chrono::duration<double>(Clock::now() - started[r]).count();
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

void end_if_stopped(const char* tool) {
  const int sig = g_stop_signal;
  if (sig == 0) return;
  std::fprintf(stderr, "%s: stopped by %s: its ranks were ended and their files removed\n", tool,
               signal_name(sig));
  std::fflush(stdout);
  std::fflush(stderr);
  signal(sig, SIG_DFL);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, sig);
  sigprocmask(SIG_UNBLOCK, &set, nullptr);
  raise(sig);
  _exit(128 + sig);  // not reached
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

ScratchDir::ScratchDir(const char* tag) : path_(make_temp_dir(tag)) {
  int fds[2];
  if (pipe(fds) != 0) {
    const int err = errno;
    remove_tree(path_);
    throw std::runtime_error("cannot make a pipe for the watcher of " + path_ + ": " +
                             std::strerror(err));
  }
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = fork();
  if (pid < 0) {
    const int err = errno;
    close(fds[0]);
    close(fds[1]);
    remove_tree(path_);
    throw std::runtime_error("cannot start the watcher of " + path_ + ": " + std::strerror(err));
  }
  if (pid == 0) {
    // The watcher. Nothing of the launcher's but the pipe's read end: no
    // terminal (its signals), no stdout or stderr (a reader waiting for
    // their end), no other descriptor.
    setsid();
    for (int sig : kStopSignals) signal(sig, SIG_IGN);
    const int null = open("/dev/null", O_RDWR);
    for (int fd = 0; fd < 3; ++fd)
      if (null >= 0) dup2(null, fd);
    for (int fd = 3; fd < 1024; ++fd)
      if (fd != fds[0]) close(fd);
    char byte;
    for (;;) {
      const ssize_t n = read(fds[0], &byte, 1);
      if (n == 0 || (n < 0 && errno != EINTR)) break;
    }
    remove_tree(path_);
    _exit(0);
  }
  close(fds[0]);
  hold_fd_ = fds[1];
  watcher_ = pid;
  owner_ = getpid();
}

ScratchDir::~ScratchDir() {
  if (getpid() != owner_) return;  // a forked copy: the launcher's to remove
  remove();
  close(hold_fd_);
  // The watcher reads end-of-file once the ranks are gone, and exits. Not
  // waited for: a process a rank left holding the pipe would hang the
  // launcher, and the folder is removed already; init reaps it otherwise.
  waitpid(watcher_, nullptr, WNOHANG);
}

void ScratchDir::remove() {
  if (removed_) return;
  removed_ = true;
  remove_tree(path_);
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

void check_rank_flags(int rank, int world, const std::string& rendezvous, bool link,
                      bool rendezvous_required) {
  if (rank >= world)
    throw std::invalid_argument("--rank " + std::to_string(rank) + " is not below --world " +
                                std::to_string(world));
  if (rank >= 0 && rendezvous_required && rendezvous.empty())
    throw std::invalid_argument(
        "--rank needs --rendezvous URL, the store every rank of the job meets at");
  if (rank < 0 && !rendezvous.empty())
    throw std::invalid_argument("--rendezvous goes with --rank (a local launch makes its own)");
  if (rank >= 0 && link)
    throw std::invalid_argument(
        "--link starts the local ranks itself; it does not combine with --rank");
}

LauncherPlacement mpi_launcher_placement(const std::vector<std::string>& configs, bool link) {
  LauncherPlacement mpi;
  for (size_t c = 0; c < configs.size(); ++c) {
    const LauncherPlacement p = mpi_launcher_placement(configs[c]);
    if (c > 0 && p.found != mpi.found)
      throw std::runtime_error(
          "under an MPI launcher every --config must use comm.backend mpi, or none (" + configs[c] +
          " differs from " + configs[0] + ")");
    mpi = p;
  }
  if (mpi.found && link)
    throw std::runtime_error(
        "--link runs local ranks; under an MPI launcher shape the links outside (see "
        "docs/lab.md)");
  return mpi;
}

}  // namespace ddph::tool
