#include "loader/tool/validate_plugin_isolate.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>

namespace ddph_validate {
namespace {

void write_all(int fd, const std::string& s) {
  size_t done = 0;
  while (done < s.size()) {
    ssize_t n = write(fd, s.data() + done, s.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += size_t(n);
  }
}

[[noreturn]] void child_main(int fd, const std::function<Outcome()>& check, bool keep_output) {
  // A sanitizer runtime turns a crash into a report and exit(1); the kernel's
  // default action lets the parent name the signal, sanitized build or not.
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) signal(sig, SIG_DFL);
  if (!keep_output) {
    int null = open("/dev/null", O_WRONLY);
    if (null >= 0) {
      dup2(null, 1);
      dup2(null, 2);
      close(null);
    }
  }
  Outcome o;
  try {
    o = check();
  } catch (const std::exception& e) {
    o = {Status::kFail, std::string("exception escaped into the validator: ") + e.what()};
  } catch (...) {
    o = {Status::kFail, "unknown exception escaped into the validator"};
  }
  const char tag = o.status == Status::kPass ? 'P' : o.status == Status::kSkip ? 'S' : 'F';
  write_all(fd, std::string(1, tag) + o.detail);
  close(fd);
  // _exit: the plugin's static destructors and atexit handlers are not part
  // of the check, and a hung plugin thread must not keep the child alive.
  _exit(0);
}

std::string signal_text(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  const char* desc = strsignal(sig);
  return std::string("SIG") + (abbrev ? abbrev : std::to_string(sig).c_str()) + " (" +
         (desc ? desc : "?") + ")";
}

}  // namespace

Outcome run_isolated(const std::function<Outcome()>& check, double timeout_s, bool keep_output) {
  int fds[2];
  if (pipe(fds) != 0) return {Status::kFail, std::string("pipe: ") + std::strerror(errno)};
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return {Status::kFail, std::string("fork: ") + std::strerror(errno)};
  }
  if (pid == 0) {
    close(fds[0]);
    child_main(fds[1], check, keep_output);
  }
  close(fds[1]);
  std::string answer;
  int status = 0;
  bool exited = false, timed_out = false;
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + std::chrono::duration<double>(timeout_s);
  bool pipe_open = true;
  while (!exited) {
    if (pipe_open) {
      pollfd p{fds[0], POLLIN, 0};
      if (poll(&p, 1, 20) > 0) {
        char buf[4096];
        const ssize_t n = read(fds[0], buf, sizeof buf);
        if (n > 0) answer.append(buf, size_t(n));
        if (n == 0) pipe_open = false;
      }
    } else {
      usleep(20 * 1000);
    }
    if (waitpid(pid, &status, WNOHANG) == pid) exited = true;
    if (!exited && std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      timed_out = true;
      break;
    }
  }
  // The child may have written its last bytes just before exiting.
  for (char buf[4096];;) {
    const ssize_t n = read(fds[0], buf, sizeof buf);
    if (n <= 0) break;
    answer.append(buf, size_t(n));
  }
  close(fds[0]);
  if (timed_out) {
    char text[64];
    std::snprintf(text, sizeof text, "hung after %.0fs", timeout_s);
    return {Status::kFail, text};
  }
  if (WIFSIGNALED(status)) return {Status::kFail, "crashed: " + signal_text(WTERMSIG(status))};
  if (answer.empty())
    return {Status::kFail, "the check's process exited with status " +
                               std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1) +
                               " without an answer (the plugin called exit?)"};
  Outcome o;
  o.status = answer[0] == 'P' ? Status::kPass : answer[0] == 'S' ? Status::kSkip : Status::kFail;
  o.detail = answer.substr(1);
  return o;
}

}  // namespace ddph_validate
